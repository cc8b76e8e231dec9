package vfs

import (
	"os"
	"syscall" // want seams: import "syscall": actors/ and storage/ reach disks and sockets

	"golang.org/x/sys/unix"
)

var _, _, _ = os.Getpagesize, syscall.Getpid, unix.Mmap
