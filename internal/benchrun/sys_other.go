//go:build !linux

package benchrun

import "os"

func procCPU(pid int) float64 { return -1 }

func dirtyMiB() float64 { return 0 }

func datasync(f *os.File) error { return f.Sync() }
