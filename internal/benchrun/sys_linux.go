//go:build linux

package benchrun

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the user+system CPU seconds of process pid, or -1.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	return parseProcStat(string(b))
}

// parseProcStat returns utime+stime in seconds from the text of a
// /proc/<pid>/stat, or -1.
func parseProcStat(s string) float64 {
	// The command name (field 2) may hold spaces: fields after the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (ut + st) / clockTicks
}

// dirtyMiB returns the system's Dirty + Writeback memory in MiB (0 if
// unknown).
func dirtyMiB() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	var kb float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "Dirty:") || strings.HasPrefix(l, "Writeback:") {
			fs := strings.Fields(l)
			if len(fs) >= 2 {
				v, _ := strconv.ParseFloat(fs[1], 64)
				kb += v
			}
		}
	}
	return kb / 1024
}

// datasync is fdatasync(2).
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
