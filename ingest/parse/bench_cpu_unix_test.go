//go:build unix

package parse

import "syscall"

// processCPU is the CPU time this process has used, in ns (every thread,
// the garbage collector's included). Benchmarks report it per op because
// wall-clock ns/op on a shared machine measures the neighbours too.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
