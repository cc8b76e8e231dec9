//go:build !linux

package main

import "os"

func benchProcCPU(pid int) float64 { return -1 }

func benchDirtyMiB() float64 { return 0 }

func benchDatasync(f *os.File) error { return f.Sync() }
