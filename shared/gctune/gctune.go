// Package gctune sets the Go garbage collector of QueueBox's processes (`queuebox serve`, the
// Lambda functions and the capture node) when the environment does not.
//
// QueueBox allocates a little for every message it moves (an HTTP request, a context, the
// scanned row) and keeps little alive between messages, so at Go's default GOGC of 100 the
// collector runs often over a small heap. Apply raises the GC percentage to Percent (400),
// which collects a quarter as often for a heap that may grow to five times what is live, and
// caps that growth with a soft memory limit of LimitShare (90 %) of the memory the process is
// given: the Lambda function's memory size (AWS_LAMBDA_FUNCTION_MEMORY_SIZE) or the cgroup's
// memory limit. GOGC and GOMEMLIMIT, when set, win: Apply then leaves the runtime's own
// reading of them alone. See docs/README.md, "Process settings".
package gctune

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Percent is the GC percentage Apply sets when GOGC is not in the environment.
const Percent = 400

// LimitShare is the share of the process's memory that Apply sets as the soft memory limit
// when GOMEMLIMIT is not in the environment and the memory is known.
const LimitShare = 0.9

// The cgroup files that hold a container's memory limit, version 2 first.
const (
	cgroupV2Max = "/sys/fs/cgroup/memory.max"
	cgroupV1Max = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// noLimit is the value at or above which a cgroup v1 limit means none (the kernel reports
// the largest page-aligned int64).
const noLimit = int64(1) << 62

// Settings is what Apply found and set.
type Settings struct {
	// Percent is the GC percentage in force: Apply's, or -1 when GOGC is set (the runtime's).
	Percent int
	// PercentFrom is "GOGC" or "queuebox".
	PercentFrom string
	// Limit is the soft memory limit Apply set in bytes, 0 when it set none.
	Limit int64
	// LimitFrom is "GOMEMLIMIT", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", a cgroup file, or "none".
	LimitFrom string
}

// LogValue prints the settings as one log attribute group.
func (s Settings) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("gc_percent", s.Percent), slog.String("gc_percent_from", s.PercentFrom),
		slog.Int64("memory_limit_bytes", s.Limit), slog.String("memory_limit_from", s.LimitFrom))
}

// Apply sets the collector from env (the process environment as a map) and the cgroup files
// of the machine. It is called once, at the start of a process.
func Apply(env map[string]string) Settings {
	return apply(env, os.ReadFile, debug.SetGCPercent, debug.SetMemoryLimit)
}

func apply(env map[string]string, readFile func(string) ([]byte, error),
	setPercent func(int) int, setLimit func(int64) int64) Settings {
	s := Settings{Percent: -1, PercentFrom: "GOGC", LimitFrom: "GOMEMLIMIT"}
	if _, ok := env["GOGC"]; !ok {
		setPercent(Percent)
		s.Percent, s.PercentFrom = Percent, "queuebox"
	}
	if _, ok := env["GOMEMLIMIT"]; ok {
		return s
	}
	memory, from := memoryOf(env, readFile)
	if memory <= 0 {
		s.LimitFrom = "none"
		return s
	}
	s.Limit = int64(float64(memory) * LimitShare)
	s.LimitFrom = from
	setLimit(s.Limit)
	return s
}

// memoryOf returns the memory the process is given in bytes and where it was read, or 0.
func memoryOf(env map[string]string, readFile func(string) ([]byte, error)) (int64, string) {
	if v := strings.TrimSpace(env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]); v != "" {
		if mb, err := strconv.ParseInt(v, 10, 64); err == nil && mb > 0 && mb < math.MaxInt64>>20 {
			return mb << 20, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
		}
	}
	for _, path := range []string{cgroupV2Max, cgroupV1Max} {
		n, err := cgroupLimit(readFile, path)
		if err == nil && n > 0 {
			return n, path
		}
	}
	return 0, ""
}

// errNoLimit says that a cgroup file holds no limit.
var errNoLimit = errors.New("no memory limit")

// cgroupLimit reads one cgroup memory limit file: a number of bytes, or "max" (v2) or a
// number at or above noLimit (v1) for none.
func cgroupLimit(readFile func(string) ([]byte, error), path string) (int64, error) {
	b, err := readFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return 0, errNoLimit
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	if n <= 0 || n >= noLimit {
		return 0, errNoLimit
	}
	return n, nil
}
