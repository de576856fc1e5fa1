package machine

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// spin burns some CPU in this process.
func spin(d time.Duration) {
	x := 0.0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 10000 {
			x += math.Sqrt(float64(i))
		}
	}
	_ = x
}

func linuxOnly(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
}

func TestProcessCPUOfThisProcess(t *testing.T) {
	linuxOnly(t)
	spin(50 * time.Millisecond)
	if got := ProcessCPU(os.Getpid()); got <= 0 {
		t.Fatalf("ProcessCPU(self) = %v, want above 0 after spinning", got)
	}
	if got := ProcessCPU(-1); got != 0 {
		t.Fatalf("ProcessCPU(-1) = %v, want 0", got)
	}
}

func TestSelfCPUGrows(t *testing.T) {
	before := SelfCPU()
	spin(50 * time.Millisecond)
	if after := SelfCPU(); after <= before {
		t.Fatalf("SelfCPU went from %v to %v while spinning", before, after)
	}
}

func TestCoreSecondsAndSample(t *testing.T) {
	linuxOnly(t)
	busy, total := CoreSeconds()
	if total <= 0 || busy <= 0 || busy > total {
		t.Fatalf("CoreSeconds = busy %v, total %v; want 0 < busy <= total", busy, total)
	}
	a := Read()
	spin(50 * time.Millisecond)
	b := Read()
	if b.WallSeconds(a) <= 0 || b.SelfSeconds(a) <= 0 || b.BusySeconds(a) < 0 {
		t.Fatalf("between samples: wall %v, self %v, busy %v", b.WallSeconds(a), b.SelfSeconds(a), b.BusySeconds(a))
	}
	if p := b.BusyPct(a); p < 0 || p > 100 {
		t.Fatalf("BusyPct = %v, want 0 to 100", p)
	}
	if p := a.BusyPct(a); p != 0 {
		t.Fatalf("BusyPct of no time = %v, want 0", p)
	}
}

func TestLoadAverage(t *testing.T) {
	linuxOnly(t)
	la := LoadAverage()
	for i, v := range la {
		if v < 0 {
			t.Fatalf("LoadAverage()[%d] = %v", i, v)
		}
	}
	if d := Describe(); d.Cores != runtime.NumCPU() || d.OS != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("Describe = %+v", d)
	}
}

func TestRound(t *testing.T) {
	for _, c := range []struct {
		v      float64
		digits int
		want   float64
	}{
		{1.234, 2, 1.23}, {1.235, 1, 1.2}, {2.5, 0, 3}, {1234.5678, 0, 1235}, {0.05, 1, 0.1},
		{-1.234, 2, -1.23}, {math.NaN(), 2, 0}, {math.Inf(1), 1, 0},
	} {
		if got := Round(c.v, c.digits); got != c.want {
			t.Errorf("Round(%v, %d) = %v, want %v", c.v, c.digits, got, c.want)
		}
	}
}

func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := StartCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	spin(20 * time.Millisecond)
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v, %v", path, fi, err)
	}
	if _, err := StartCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil {
		t.Fatal("StartCPUProfile into a missing folder succeeded")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{9, 1, 5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
