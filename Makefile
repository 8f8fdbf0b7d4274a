# tandem build. `make` builds build/tandem, the test programs and the benchmarks.
#   make MPI=mpich        build against MPICH instead of Open MPI
#   make PORTABLE=v3      one binary for every x86-64-v3 host (AVX2 + FMA), in build-v3/:
#                         the same results as the native build, on any processor of a cluster
#                         (PORTABLE=v4 for AVX-512 hosts only; no v2: the kernels' 8-lane vectors need AVX)
#   make SAN=address      AddressSanitizer + UBSan build in build-asan/
#   make SAN=thread       ThreadSanitizer build in build-tsan/
#   make test             build and run every test (scripts/test.sh)
# Each folder of src/ is one module and one static library; a module uses only the modules
# below it (the DEPS_ lines), enforced by the linker and, for headers, by scripts/check-deps.sh:
#   tools -> ab -> train -> {model, data, distributed} -> {prof, kernels, tokenizer} -> core,
#   tools -> plan -> runs -> prof,
#   plus model -> data through the batch type

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

# The compiler's target: the machine it runs on by default (fastest there), or a named x86-64
# level whose binary runs on every host that has it. Results do not depend on the choice
# (docs/user-guide.md, "One build for a cluster").
PORTABLE ?=
ifneq ($(PORTABLE),)
  ifeq ($(filter v3 v4,$(PORTABLE)),)
    $(error PORTABLE must be v3 or v4 (an x86-64 level with AVX2 and FMA), not '$(PORTABLE)')
  endif
  ARCH := -march=x86-64-$(PORTABLE) -mtune=generic
  BUILD := $(BUILD)-$(PORTABLE)
endif

PKGS := openblas libpng libjpeg libpcre2-8 libxxhash libutf8proc zlib
ARCH ?= -march=native
OPT ?= -O2
# No contraction of a * b + c into a fused multiply-add behind the source's back: whether the
# compiler fuses depends on the target's tuning and on the loop around it, so the same value
# could round differently in two call sites or on two processors. The kernels write the fused
# operations they want (tdm_v8_fma in src/kernels/vec.h).
CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g $(ARCH) -ffp-contract=off -Wall -Wextra -pthread \
          -Isrc $(shell pkg-config --cflags $(PKGS)) $(SANFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SANFLAGS)
LDLIBS := $(shell pkg-config --libs $(PKGS)) -lm

# plain `make` builds everything (the module rules below would otherwise make build/libcore.a the default)
.DEFAULT_GOAL := all

# module -> the modules it may use (in link order, itself excluded); scripts/check-deps.sh reads
# these lines and fails on an #include that runs against them
DEPS_core :=
DEPS_kernels := core
DEPS_tokenizer := core
DEPS_prof := core
DEPS_data := tokenizer prof core
DEPS_model := data tokenizer kernels prof core
DEPS_distributed := prof kernels core
DEPS_runs := prof core
DEPS_train := model data distributed prof tokenizer kernels core
DEPS_plan := runs prof core
DEPS_ab := train runs model data distributed prof tokenizer kernels core
DEPS_tools := ab plan train runs model data distributed prof tokenizer kernels core
MODULES := core kernels tokenizer prof runs plan data model distributed train ab

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

# The compiler's target as the binary reports it (core/platform.h): what -march=native meant here,
# or the portable level.
ifneq ($(PORTABLE),)
  TARGET_DESC = x86-64-$(PORTABLE) (portable)
else ifeq ($(strip $(ARCH)),-march=native)
  TARGET_DESC = native ($(shell $(CC) -march=native -Q --help=target 2>/dev/null | sed -n 's/^[[:space:]]*-march=[[:space:]]*//p' | head -n 1))
else
  TARGET_DESC = $(strip $(ARCH))
endif
$(BUILD)/obj/core/platform.o: CFLAGS += -DTDM_BUILD_TARGET='"$(TARGET_DESC)"'

# The version `tandem --version` prints: `git describe` of the tree ("unknown" outside git). The stamp file
# changes when that does (HEAD moved, the tree became dirty or clean), and version.o is rebuilt from it.
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/version.stamp: FORCE
	@mkdir -p $(@D)
	@echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@
$(BUILD)/obj/tools/version.o: $(BUILD)/version.stamp
$(BUILD)/obj/tools/version.o: CFLAGS += -DTDM_VERSION='"$(VERSION)"'

$(BUILD)/tandem: $(TOOLS_OBJ) $(call libs_for,tools)
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
	rm -rf build build-asan build-tsan build-mpich build-asan-mpich build-tsan-mpich build-v[34] build-*-v[34] build-retuned

FORCE:

.PHONY: all tests bench test clean FORCE
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
