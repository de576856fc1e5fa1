package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReferenceListsEveryKeyOfEveryKind checks that Reference walks what the loader knows:
// every numeric key that the bounds cover, the connector kinds' blocks with their defaults,
// and the kinds that only the type key selects.
func TestReferenceListsEveryKeyOfEveryKind(t *testing.T) {
	t.Parallel()
	comps := testComponents()
	entries, keys := Reference(comps)
	patterns := map[string]KeyDoc{}
	for _, k := range keys {
		require.NotNil(t, k.Owner, k.Pattern)
		require.NotEmpty(t, k.Field, k.Pattern)
		if _, ok := patterns[k.Pattern]; !ok {
			patterns[k.Pattern] = k
		}
	}
	for _, n := range numericKeys(comps) {
		n = trimListIndex(n)
		k, ok := patterns[n]
		if assert.True(t, ok, "Reference lacks the numeric key %s", n) {
			assert.Positive(t, k.Max, "the bound of %s", n)
		}
	}

	find := func(pattern, kind string) KeyDoc {
		for _, k := range keys {
			if k.Pattern == pattern && k.Kind == kind {
				return k
			}
		}
		t.Fatalf("Reference lacks %s of kind %q", pattern, kind)
		return KeyDoc{}
	}
	assert.Equal(t, int64(8080), find("server.httpPort", "").Default.Int())
	kafka := find("destinations.*.keyTemplate", "kafka")
	assert.Equal(t, "{{ key }}", kafka.Default.String())
	assert.Equal(t, "destinations.*", kafka.Entry)
	assert.False(t, kafka.Common)
	assert.Equal(t, "{{ source }}", find("sources.*.topic", "nats").Default.String())
	assert.Equal(t, "{{ eventType }}", find("sources.*.topic", "http").Default.String())
	assert.Equal(t, string(PayloadBody), find("admin.auth.signaturePayloadFormat", "hmac").Default.String())
	assert.True(t, find("outbox.capture", "").Block)
	assert.Equal(t, reflect.TypeFor[Milliseconds](), find("routes[*].transform.timeoutMs", "").Type)

	i := slices.IndexFunc(entries, func(e EntryDoc) bool { return e.Pattern == "sources.*.auth" })
	require.GreaterOrEqual(t, i, 0)
	var byType []string
	for _, k := range entries[i].Kinds {
		if k.ByType {
			byType = append(byType, k.Name)
		}
	}
	assert.Equal(t, []string{"stripe", "standard-webhooks"}, byType)
}

// trimListIndex writes a bound's pattern of a list item (outbox.retry.scheduleMs[*]) as the
// key of the list.
func trimListIndex(p string) string {
	if len(p) > 3 && p[len(p)-3:] == "[*]" {
		return p[:len(p)-3]
	}
	return p
}
