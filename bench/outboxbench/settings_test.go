package outboxbench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseSettings(t *testing.T) {
	poll := DefaultSettings().PollInterval
	for in, want := range map[string]Settings{
		"500x64":         {BatchSize: 500, Concurrency: 64, PollInterval: poll},
		" 100x8 ":        {BatchSize: 100, Concurrency: 8, PollInterval: poll},
		"500x128:lease":  {BatchSize: 500, Concurrency: 128, PollInterval: poll},
		"500x128:lock":   {BatchSize: 500, Concurrency: 128, PollInterval: poll, ClaimMode: "lock"},
		" 50x16:lock\t ": {BatchSize: 50, Concurrency: 16, PollInterval: poll, ClaimMode: "lock"},
	} {
		got, err := ParseSettings(in)
		if err != nil || got != want {
			t.Errorf("ParseSettings(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

func TestParseSettingsRejects(t *testing.T) {
	for _, in := range []string{"", "500", "500x", "x64", "0x64", "500x0", "-1x8", "axb", "500x64:", "500x64:LOCK",
		"500x64:locked", "500x64:lock:lock", "500x64 :lock", ":lock"} {
		if s, err := ParseSettings(in); err == nil {
			t.Errorf("ParseSettings(%q) = %+v, want an error", in, s)
		}
	}
	if _, err := ParseSettings("500x64:fast"); err == nil || !strings.Contains(err.Error(), "lease or lock") {
		t.Errorf("ParseSettings(500x64:fast) error = %v, want one that names lease and lock", err)
	}
}

func TestSettingsStringAndJSON(t *testing.T) {
	lease := Settings{BatchSize: 500, Concurrency: 128, PollInterval: 100 * time.Millisecond}
	lock := lease
	lock.ClaimMode = "lock"
	if got, want := lease.String(), "batchSize 500, concurrency 128, pollIntervalMs 100"; got != want {
		t.Errorf("lease String() = %q, want %q", got, want)
	}
	if got, want := lock.String(), "batchSize 500, concurrency 128, pollIntervalMs 100, claimMode lock"; got != want {
		t.Errorf("lock String() = %q, want %q", got, want)
	}
	for s, want := range map[Settings]string{
		lease: `{"batchSize":500,"concurrency":128,"pollIntervalMs":100,"claimMode":"lease"}`,
		lock:  `{"batchSize":500,"concurrency":128,"pollIntervalMs":100,"claimMode":"lock"}`,
	} {
		data, err := json.Marshal(s)
		if err != nil || string(data) != want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", s, data, err, want)
		}
	}
	if runName(1000, true, lock) != "1000 keys, tuned lock" || runName(0, false, lease) != "no keys, default" {
		t.Errorf("runName = %q, %q", runName(1000, true, lock), runName(0, false, lease))
	}
}
