#include "textflag.h"

// func vfork(trap, a1, a2, a3 uintptr) (pid uintptr, errno syscall.Errno)
//
// A system call that returns twice on one stack: trap is clone or clone3
// with CLONE_VM|CLONE_VFORK, so the child runs first, on this goroutine's
// stack, while the parent sleeps until the child execs or exits. The
// child's calls write below the caller's frame, where this function's
// return address lies; the parent must not find it there afterwards, so
// it is kept in a register across the call (each task has its own
// registers) and put back.
TEXT ·vfork(SB),NOSPLIT|NOFRAME,$0-48
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	XORQ	R10, R10
	XORQ	R8, R8
	XORQ	R9, R9
	MOVQ	trap+0(FP), AX
	POPQ	R12
	SYSCALL
	PUSHQ	R12
	CMPQ	AX, $0xfffffffffffff001
	JLS	done
	NEGQ	AX
	MOVQ	$0, pid+32(FP)
	MOVQ	AX, errno+40(FP)
	RET
done:
	MOVQ	AX, pid+32(FP)
	MOVQ	$0, errno+40(FP)
	RET
