package template_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/template"
)

// benchRow has a payload of about 2 KB, the size of a typical event.
var benchRow = func() template.Row {
	var b strings.Builder
	b.WriteString(`{"id":"5f0c7a0e-3c1b-4a57-9d2e-0a4f1b2c3d4e","region":"eu","customer":{"id":"c-1","region":"de","tier":{"level":3}},"lines":[`)
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"sku":"SKU-000123","qty":2,"price":19.99,"note":"a line of the order with some text"}`)
	}
	b.WriteString(`],"amount":12345678901234567890,"paid":true}`)
	return template.Row{Topic: "order.created", Key: "order-42", AggregateType: "order", Payload: json.RawMessage(b.String())}
}()

func BenchmarkAddressRender(b *testing.B) {
	for _, bm := range []struct{ name, text string }{
		{"literal", "queuebox-events"},
		{"aggregate type", "public.{{ aggregateType }}.v1"},
		{"payload field", "events.{{ payload.region }}"},
		{"nested payload field", "events.{{ data.customer.tier.level }}.{{ topic }}"},
	} {
		a, err := template.CompileAddress(bm.text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Render(benchRow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRoutingKeyRender(b *testing.B) {
	for _, bm := range []struct{ name, text string }{
		{"default topic", template.DefaultRabbitMQRoutingKey},
		{"payload and topic", "{{ payload.region }}.{{ topic }}"},
		{"missing field", "{{ payload.missing }}.{{ topic }}"},
		{"object field", "{{ payload.customer }}"},
	} {
		k := template.CompileRoutingKey(bm.text, "unknown")
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = k.Render(benchRow)
			}
		})
	}
}

func BenchmarkKafkaKeyRender(b *testing.B) {
	k := template.CompileKafkaKey(template.DefaultKafkaKey)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = k.Render(benchRow)
	}
}
