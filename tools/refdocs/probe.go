package main

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/service"
)

// probeName is the name of the destination or source that a probe sets.
const probeName = "probe"

// probeBase is what every probe sets, so that the configuration's required keys are there and
// the sections that a switch turns on are checked.
var probeBase = map[string]string{
	"QUEUEBOX_DATABASE_URL":      "postgres://probe@127.0.0.1:5432/probe",
	"QUEUEBOX_DATABASE_USERNAME": "probe",
	"QUEUEBOX_DATABASE_PASSWORD": "probe",
	"QUEUEBOX_ADMIN_ENABLED":     "true",
	"QUEUEBOX_RETENTION_ENABLED": "true",
}

// lowerBounds asks the validation for the smallest value of every numeric key: it loads a
// configuration that sets the key to 0, then to -1, and returns, by key pattern and kind
// ("destinations.*.timeoutMs kafka"), what the validation says of the first value it refuses
// ("must be above 0"), or "" when it takes both.
func lowerBounds(entries []config.EntryDoc, keys []config.KeyDoc) (map[string]string, error) {
	pr := newProber(entries, keys)
	out := map[string]string{}
	for _, k := range keys {
		if k.Block || !isNumeric(k.Type) {
			continue
		}
		id := k.Pattern + " " + k.Kind
		if _, done := out[id]; done {
			continue
		}
		msg, err := pr.probe(k)
		if err != nil {
			return nil, err
		}
		out[id] = msg
	}
	return out, nil
}

// isNumeric reports whether a key of type t holds whole numbers.
func isNumeric(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.Int || t.Kind() == reflect.Int64
}

// prober builds and loads the configurations of lowerBounds.
type prober struct {
	entries []config.EntryDoc
	keys    []config.KeyDoc
	blocks  map[string]config.KeyDoc // the key of each block, by pattern
}

// newProber returns the prober of the configuration's keys.
func newProber(entries []config.EntryDoc, keys []config.KeyDoc) prober {
	pr := prober{entries: entries, keys: keys, blocks: map[string]config.KeyDoc{}}
	for _, k := range keys {
		if _, ok := pr.blocks[k.Pattern]; !ok && k.Block {
			pr.blocks[k.Pattern] = k
		}
	}
	return pr
}

// probeEnv returns a new environment with probeBase.
func probeEnv() map[string]string {
	env := make(map[string]string, len(probeBase))
	for name, v := range probeBase {
		env[name] = v
	}
	return env
}

// probe returns what the validation says of the key k set to 0, else to -1.
func (pr prober) probe(k config.KeyDoc) (string, error) {
	env := probeEnv()
	pr.selectKinds(env, k.Entry, k.Kind)
	path := concrete(k.Pattern)
	if k.Type.Kind() == reflect.Slice {
		path += "[0]"
	}
	base, err := problems(env)
	if err != nil {
		return "", err
	}
	zeroTaken := true
	for _, value := range []string{"0", "-1"} {
		env[config.EnvVarName(path)] = value
		got, err := problems(env)
		if err != nil {
			return "", err
		}
		msg, ok := got[path]
		if !ok || base[path] != "" {
			continue
		}
		if value == "0" {
			zeroTaken = false
		}
		if strings.HasPrefix(msg, "is required") {
			continue // 0 is an unset key here; -1 says more
		}
		return smallest(msg, zeroTaken), nil
	}
	return "", nil
}

// smallest writes what the validation says of a value below the smallest (msg) as the
// smallest value: "must be above 0" is "above 0", "must not be negative" is "0"; zeroTaken
// says that the validation took 0 and refused only -1.
func smallest(msg string, zeroTaken bool) string {
	msg, _, _ = strings.Cut(msg, ", not ")
	switch {
	case msg == "must not be negative":
		return "0"
	case zeroTaken:
		return "0, or " + strings.TrimPrefix(msg, "must be ")
	}
	return strings.TrimPrefix(msg, "must be ")
}

// selectKinds sets the keys that select the kind of the entry and of every entry around it.
func (pr prober) selectKinds(env map[string]string, entry, kind string) {
	for entry != "" {
		for _, e := range pr.entries {
			if e.Pattern != entry {
				continue
			}
			for _, k := range e.Kinds {
				if k.Name == kind {
					pr.setRequired(env, e, k)
				}
			}
		}
		outer := pr.blocks[entry]
		if strings.HasSuffix(entry, ".*") || strings.HasSuffix(entry, "[*]") {
			outer = pr.blocks[entry[:strings.LastIndexAny(entry, ".[")]]
		}
		entry, kind = outer.Entry, outer.Kind
	}
}

// setRequired sets the keys that select the kind k of the entry e.
func (pr prober) setRequired(env map[string]string, e config.EntryDoc, k config.KindDoc) {
	at := concrete(e.Pattern)
	if k.ByType {
		env[config.EnvVarName(at+".type")] = k.Name
	}
	for _, req := range k.Required {
		path := at + "." + req
		for _, key := range pr.keys {
			if key.Pattern == e.Pattern+"."+req && key.Type.Kind() == reflect.Slice {
				path += "[0]"
				break
			}
		}
		env[config.EnvVarName(path)] = probeName
	}
}

// concrete writes a key pattern as a key path of the probe: destinations.probe.timeoutMs,
// routes[0].transform.timeoutMs.
func concrete(pattern string) string {
	s := strings.ReplaceAll(pattern, "[*]", "[0]")
	return strings.ReplaceAll(s, ".*", "."+probeName)
}

// problems loads the configuration of env and returns its problems by key path.
func problems(env map[string]string) (map[string]string, error) {
	_, _, err := service.Load(service.LoadOptions{
		Env:        env,
		NoPackaged: true,
		ReadFile:   func(string) ([]byte, error) { return nil, fs.ErrNotExist },
	})
	out := map[string]string{}
	var verr *config.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &verr):
		for _, p := range verr.Problems {
			if _, ok := out[p.Key]; !ok {
				out[p.Key] = p.Message
			}
		}
	default:
		return nil, fmt.Errorf("loading a probe of the configuration: %w", err)
	}
	return out, nil
}

// refusedKinds asks the validation which kinds of an entry it refuses where the entry stands
// (admin.auth takes no kind that only a source takes): it loads a configuration that selects
// each kind, and returns, by entry pattern and kind, the problem that it reports on the
// entry's type key.
func refusedKinds(entries []config.EntryDoc, keys []config.KeyDoc) (map[string]string, error) {
	pr := newProber(entries, keys)
	out := map[string]string{}
	for _, e := range entries {
		for _, k := range e.Kinds {
			env := probeEnv()
			pr.selectKinds(env, e.Pattern, k.Name)
			got, err := problems(env)
			if err != nil {
				return nil, err
			}
			typeKey := concrete(e.Pattern) + ".type"
			if msg, ok := got[typeKey]; ok {
				out[e.Pattern+" "+k.Name] = code(displayKey(e.Pattern)+".type") + " " + msg
			}
		}
	}
	return out, nil
}
