#!/usr/bin/env python3
"""no_cma.py CMD ARGS... - runs CMD where cross-memory attach is refused, as in a container without
CAP_SYS_PTRACE: a seccomp filter, inherited by every child, makes process_vm_readv and process_vm_writev
fail with EPERM. Everything else is allowed. x86-64 Linux only; elsewhere it exits 77 (skip).
"""
import ctypes
import os
import platform
import struct
import sys

if platform.machine() != "x86_64" or len(sys.argv) < 2:
    sys.stderr.write("no_cma.py: needs x86-64 Linux and a command\n")
    sys.exit(77)

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
AUDIT_ARCH_X86_64 = 0xC000003E
NR_PROCESS_VM_READV, NR_PROCESS_VM_WRITEV = 310, 311
RET_ALLOW, RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


prog = [
    insn(LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
    insn(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
    insn(RET_K, 0, 0, RET_ALLOW),
    insn(LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    insn(JEQ_K, 2, 0, NR_PROCESS_VM_READV),
    insn(JEQ_K, 1, 0, NR_PROCESS_VM_WRITEV),
    insn(RET_K, 0, 0, RET_ALLOW),
    insn(RET_K, 0, 0, RET_ERRNO | EPERM),
]
code = b"".join(prog)
buf = ctypes.create_string_buffer(code, len(code))


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


fprog = SockFprog(len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
    sys.stderr.write("no_cma.py: cannot install a seccomp filter: %s\n" % os.strerror(ctypes.get_errno()))
    sys.exit(77)
os.execvp(sys.argv[1], sys.argv[1:])
