package relay_test

import (
	"testing"

	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/relay"
)

// TestTopicTemplateContract pins the rendering of spec/31, "Source topic template":
// {{ source }} and {{ eventType }} work with and without the inner spaces, any other text stays
// as it is, and the result is trimmed.
func TestTopicTemplateContract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		template  string
		source    string
		eventType string
		want      string
	}{
		{name: "source with spaces", template: "{{ source }}", source: "stripe", want: "stripe"},
		{name: "source without spaces", template: "{{source}}", source: "stripe", want: "stripe"},
		{name: "event type with spaces", template: "{{ eventType }}", source: "stripe", eventType: "payment.succeeded", want: "payment.succeeded"},
		{name: "event type without spaces", template: "{{eventType}}", source: "stripe", eventType: "payment.succeeded", want: "payment.succeeded"},
		{name: "literal prefix", template: "stripe.{{ eventType }}", source: "stripe", eventType: "charge.refunded", want: "stripe.charge.refunded"},
		{name: "both placeholders mixed spacing", template: "{{ source }}.{{eventType}}", source: "orders", eventType: "created", want: "orders.created"},
		{name: "placeholder twice", template: "{{source}}-{{ source }}", source: "a", want: "a-a"},
		{name: "literal only", template: "payments", source: "stripe", want: "payments"},
		{name: "result is trimmed", template: "  {{ eventType }}\t", source: "s", eventType: "x.y", want: "x.y"},
		{name: "value is trimmed at the edge", template: "{{ eventType }}", source: "s", eventType: "  x.y \n", want: "x.y"},
		{name: "inner white space stays", template: "{{ source }} {{ eventType }}", source: "a", eventType: "b", want: "a b"},
		{name: "missing event type renders empty", template: "{{ eventType }}", source: "stripe", want: ""},
		{name: "missing event type with blanks renders empty", template: "  {{eventType}}  ", source: "stripe", want: ""},
		{name: "missing event type leaves the literal", template: "stripe.{{ eventType }}", source: "stripe", want: "stripe."},
		{name: "empty template", template: "", source: "stripe", want: ""},
		{name: "unknown placeholder stays as written", template: "{{ topic }}", source: "stripe", want: "{{ topic }}"},
		{name: "unknown placeholder next to a known one", template: "{{ tenant }}.{{ source }}", source: "stripe", want: "{{ tenant }}.stripe"},
		{name: "one-sided spacing is not a placeholder", template: "{{ source}}", source: "stripe", want: "{{ source}}"},
		{name: "double spacing is not a placeholder", template: "{{  source  }}", source: "stripe", want: "{{  source  }}"},
		{name: "names are case sensitive", template: "{{ Source }}.{{ eventtype }}", source: "stripe", eventType: "e", want: "{{ Source }}.{{ eventtype }}"},
		{name: "extra braces stay", template: "{{{{source}}}}", source: "stripe", want: "{{stripe}}"},
		{name: "unclosed placeholder stays", template: "{{ source", source: "stripe", want: "{{ source"},
		{name: "inserted value is not expanded again", template: "{{ eventType }}", source: "stripe", eventType: "{{ source }}", want: "{{ source }}"},
		{name: "multibyte literal", template: "événements.{{ source }}", source: "café", want: "événements.café"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := relay.CompileTopic(tt.template)
			if got := tmpl.Render(tt.source, tt.eventType); got != tt.want {
				t.Errorf("CompileTopic(%q).Render(%q, %q) = %q, want %q", tt.template, tt.source, tt.eventType, got, tt.want)
			}
			if got := tmpl.String(); got != tt.template {
				t.Errorf("String() = %q, want %q", got, tt.template)
			}
		})
	}
}

func TestZeroTopicTemplateRendersEmpty(t *testing.T) {
	t.Parallel()
	var tmpl relay.TopicTemplate
	if got := tmpl.Render("stripe", "e"); got != "" {
		t.Errorf("zero template rendered %q", got)
	}
}

func TestDefaultTopic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind   kind.Kind
		want   string
		wantOK bool
	}{
		{kind: kind.HTTP, want: "{{ eventType }}", wantOK: true},
		{kind: "rabbitmq", want: "{{ source }}", wantOK: true},
		{kind: "kafka", want: "{{ source }}", wantOK: true},
		{kind: "nats", want: "{{ source }}", wantOK: true},
		{kind: "sqs", want: "{{ source }}", wantOK: true},
		{kind: "", wantOK: false},
	}
	for _, tt := range tests {
		got, ok := relay.DefaultTopic(tt.kind)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("DefaultTopic(%q) = %q, %v; want %q, %v", tt.kind, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestNewRejectsSourceWithoutTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		sources map[string]relay.Source
		wantErr bool
	}{
		{name: "explicit topic, unknown kind", sources: map[string]relay.Source{"s": {Topic: "t"}}},
		{name: "default of a kind", sources: map[string]relay.Source{"s": {Kind: "kafka"}}},
		{name: "blank topic, unknown kind", sources: map[string]relay.Source{"s": {Topic: "  "}}, wantErr: true},
		{name: "blank name", sources: map[string]relay.Source{" ": {Kind: kind.HTTP}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := relay.New(relay.Options{Store: nopStore{}, Sources: tt.sources})
			if (err != nil) != tt.wantErr {
				t.Errorf("New error = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
	if _, err := relay.New(relay.Options{}); err == nil {
		t.Error("New without a store succeeded")
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	got := relay.Config{}.WithDefaults()
	want := relay.Config{
		PollInterval: 100e6, BatchSize: 100, ClaimTimeout: 300e9, PendingGaugeInterval: 5e9,
		MaxAttempts: 5, ShutdownTimeout: 30e9,
	}
	if got != want {
		t.Errorf("WithDefaults() = %+v, want %+v", got, want)
	}
	set := relay.Config{PollInterval: 1, BatchSize: 2, ClaimTimeout: 3, PendingGaugeInterval: 4, MaxAttempts: 6, ShutdownTimeout: 7}
	if got := set.WithDefaults(); got != set {
		t.Errorf("WithDefaults() changed set values: %+v", got)
	}
}
