package gctune

import (
	"io/fs"
	"math"
	"runtime/debug"
	"slices"
	"testing"
)

// machine is a fake of the runtime's setters and the cgroup files.
type machine struct {
	files   map[string]string
	percent []int
	limit   []int64
}

func (m *machine) readFile(path string) ([]byte, error) {
	v, ok := m.files[path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(v), nil
}

func (m *machine) setPercent(p int) int   { m.percent = append(m.percent, p); return 100 }
func (m *machine) setLimit(n int64) int64 { m.limit = append(m.limit, n); return math.MaxInt64 }

func TestApply(t *testing.T) {
	const mib = int64(1) << 20
	cases := []struct {
		name      string
		env       map[string]string
		files     map[string]string
		percent   []int
		limit     []int64
		limitFrom string
	}{
		{name: "nothing known", percent: []int{Percent}, limitFrom: "none"},
		{name: "GOGC set", env: map[string]string{"GOGC": "100"}, limitFrom: "none"},
		{name: "GOGC off", env: map[string]string{"GOGC": "off"}, limitFrom: "none"},
		{name: "Lambda memory", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"},
			percent: []int{Percent}, limit: []int64{share(128 * mib)}, limitFrom: "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"},
		{name: "Lambda memory wins over the cgroup", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"},
			files:   map[string]string{cgroupV2Max: "536870912\n"},
			percent: []int{Percent}, limit: []int64{share(1024 * mib)}, limitFrom: "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"},
		{name: "an unreadable Lambda memory falls back to the cgroup", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"},
			files:   map[string]string{cgroupV2Max: "536870912\n"},
			percent: []int{Percent}, limit: []int64{share(512 * mib)}, limitFrom: cgroupV2Max},
		{name: "cgroup v2 limit", files: map[string]string{cgroupV2Max: "1073741824\n"},
			percent: []int{Percent}, limit: []int64{share(1024 * mib)}, limitFrom: cgroupV2Max},
		{name: "cgroup v2 max, v1 limit", files: map[string]string{cgroupV2Max: "max\n", cgroupV1Max: "268435456\n"},
			percent: []int{Percent}, limit: []int64{share(256 * mib)}, limitFrom: cgroupV1Max},
		{name: "cgroup v1 without a limit", files: map[string]string{cgroupV1Max: "9223372036854771712\n"},
			percent: []int{Percent}, limitFrom: "none"},
		{name: "cgroup file unreadable", files: map[string]string{cgroupV2Max: "garbage"},
			percent: []int{Percent}, limitFrom: "none"},
		{name: "GOMEMLIMIT set", env: map[string]string{"GOMEMLIMIT": "100MiB", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"},
			percent: []int{Percent}, limitFrom: "GOMEMLIMIT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &machine{files: c.files}
			env := c.env
			if env == nil {
				env = map[string]string{}
			}
			s := apply(env, m.readFile, m.setPercent, m.setLimit)
			if !slices.Equal(m.percent, c.percent) {
				t.Errorf("GC percent set to %v, want %v", m.percent, c.percent)
			}
			if !slices.Equal(m.limit, c.limit) {
				t.Errorf("memory limit set to %v, want %v", m.limit, c.limit)
			}
			if s.LimitFrom != c.limitFrom {
				t.Errorf("LimitFrom = %q, want %q", s.LimitFrom, c.limitFrom)
			}
			if len(c.limit) == 1 && s.Limit != c.limit[0] {
				t.Errorf("Limit = %d, want %d", s.Limit, c.limit[0])
			}
			if len(c.percent) == 1 && (s.Percent != Percent || s.PercentFrom != "queuebox") {
				t.Errorf("Percent = %d from %q, want %d from queuebox", s.Percent, s.PercentFrom, Percent)
			}
			if len(c.percent) == 0 && (s.Percent != -1 || s.PercentFrom != "GOGC") {
				t.Errorf("Percent = %d from %q, want -1 from GOGC", s.Percent, s.PercentFrom)
			}
		})
	}
}

// TestApplySetsTheRuntime applies the settings to this test process and reads them back.
func TestApplySetsTheRuntime(t *testing.T) {
	before := debug.SetGCPercent(100)
	beforeLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(before)
		debug.SetMemoryLimit(beforeLimit)
	})
	s := Apply(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256"})
	if got := debug.SetGCPercent(100); got != Percent {
		t.Errorf("GC percent after Apply = %d, want %d", got, Percent)
	}
	want := share(256 << 20)
	if got := debug.SetMemoryLimit(-1); got != want || s.Limit != want {
		t.Errorf("memory limit after Apply = %d (Settings %d), want %d", got, s.Limit, want)
	}
}

// share is LimitShare of n bytes, rounded down as Apply rounds it.
func share(n int64) int64 {
	v := float64(n) * LimitShare
	return int64(v)
}
