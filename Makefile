# tandem build. `make` builds build/tandem, the test programs and the benchmarks.
#   make MPI=mpich        build against MPICH instead of Open MPI
#   make SAN=address      AddressSanitizer + UBSan build in build-asan/
#   make SAN=thread       ThreadSanitizer build in build-tsan/
#   make test             build and run every test (scripts/test.sh)
# Each folder of src/ is one module and one static library; a module links only
# against the modules below it, so the dependency direction is enforced by the linker:
#   tools -> train -> {model, data, dist, prof} -> {kernels, tokenizer} -> core

MPI ?= openmpi
ifeq ($(MPI),mpich)
  MPICC ?= mpicc.mpich
else
  MPICC ?= mpicc.openmpi
endif
CC := $(MPICC)

SAN ?=
ifeq ($(SAN),address)
  BUILD ?= build-asan
  SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SAN),thread)
  BUILD ?= build-tsan
  SANFLAGS := -fsanitize=thread
else
  BUILD ?= build
  SANFLAGS :=
endif
ifneq ($(MPI),openmpi)
  BUILD := $(BUILD)-$(MPI)
endif

PKGS := openblas libpng libjpeg libpcre2-8 libxxhash libutf8proc
ARCH ?= -march=native
OPT ?= -O2
# -std=c11 would turn FMA contraction off; the kernels want it, so ask for it explicitly.
CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g $(ARCH) -ffp-contract=fast -Wall -Wextra -pthread \
          -Isrc $(shell pkg-config --cflags $(PKGS)) $(SANFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SANFLAGS)
LDLIBS := $(shell pkg-config --libs $(PKGS)) -lm

# plain `make` builds everything (the module rules below would otherwise make build/libcore.a the default)
.DEFAULT_GOAL := all

# module -> the modules it may use (in link order, itself excluded)
DEPS_core :=
DEPS_kernels := core
DEPS_tokenizer := core
DEPS_data := tokenizer prof core
DEPS_model := kernels prof core
DEPS_dist := prof kernels core
DEPS_prof := core
DEPS_train := model data dist prof tokenizer kernels core
DEPS_tools := train model data dist prof tokenizer kernels core
MODULES := core kernels tokenizer data model dist prof train

lib = $(BUILD)/lib$(1).a
libs_for = $(foreach m,$(filter $(MODULES),$(1) $(DEPS_$(1))),$(call lib,$(m)))

define module_rules
SRC_$(1) := $$(wildcard src/$(1)/*.c)
OBJ_$(1) := $$(SRC_$(1):src/%.c=$(BUILD)/obj/%.o)
$(call lib,$(1)): $$(OBJ_$(1))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_rules,$(m))))

# tests/<module>/test_*.c and mpitest_*.c link against that module and those below it.
TEST_SRC := $(wildcard tests/*/test_*.c tests/*/mpitest_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
test_module = $(word 2,$(subst /, ,$(1)))

BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

TOOLS_SRC := $(wildcard src/tools/*.c)
TOOLS_OBJ := $(TOOLS_SRC:src/%.c=$(BUILD)/obj/%.o)

all: $(BUILD)/tandem tests bench
tests: $(TEST_BIN)
bench: $(BENCH_BIN)

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tandem: $(TOOLS_OBJ) $(call libs_for,train)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

.SECONDEXPANSION:
$(BUILD)/tests/%: tests/%.c $$(call libs_for,$$(call test_module,tests/%.c))
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -MMD -MP -o $@ $< $(call libs_for,$(call test_module,tests/$*.c)) $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(call libs_for,tools)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -MMD -MP -o $@ $< $(call libs_for,tools) $(LDFLAGS) $(LDLIBS)

test: all
	BUILD=$(BUILD) scripts/test.sh

clean:
	rm -rf build build-asan build-tsan build-mpich build-asan-mpich build-tsan-mpich

.PHONY: all tests bench test clean
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
