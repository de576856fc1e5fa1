package template

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknownPlaceholder is the cause of an *UnknownPlaceholderError.
	ErrUnknownPlaceholder = errors.New("template: unknown placeholder")
	// ErrUnknownColumn is returned for an exchangeFrom, topicFrom or subjectFrom that is not
	// aggregate_type, topic or key.
	ErrUnknownColumn = errors.New("template: unknown address column")
	// ErrEmptyAddress is returned when an address renders empty or only white space. The
	// publish of that row fails, and the row follows the retry path.
	ErrEmptyAddress = errors.New("template: the address is empty")
)

// UnknownPlaceholderError reports the placeholders of an address template that name no value.
// It unwraps to ErrUnknownPlaceholder.
type UnknownPlaceholderError struct {
	// Template is the address template as written.
	Template string
	// Placeholders are the unknown placeholders as written, in order.
	Placeholders []string
}

// Error names the unknown placeholders and the ones that an address template knows. The caller
// adds the key path, which names the field and the destination.
func (e *UnknownPlaceholderError) Error() string {
	noun := "placeholder"
	if len(e.Placeholders) > 1 {
		noun = "placeholders"
	}
	return fmt.Sprintf("the address template %q uses the %s %s, which an address template does not know: "+
		"use {{ topic }}, {{ key }}, {{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}",
		e.Template, noun, strings.Join(e.Placeholders, ", "))
}

// Unwrap returns ErrUnknownPlaceholder.
func (e *UnknownPlaceholderError) Unwrap() error { return ErrUnknownPlaceholder }

// ValidateAddress checks the placeholders of an address template. It returns an
// *UnknownPlaceholderError that lists every placeholder with another name, or nil.
func ValidateAddress(text string) error {
	if unknown := UnknownAddressPlaceholders(text); len(unknown) > 0 {
		return &UnknownPlaceholderError{Template: text, Placeholders: unknown}
	}
	return nil
}

// The row columns that exchangeFrom, topicFrom and subjectFrom can name, with the underscore.
const (
	// ColumnAggregateType is the aggregate_type column.
	ColumnAggregateType = "aggregate_type"
	// ColumnTopic is the topic column.
	ColumnTopic = "topic"
	// ColumnKey is the key column.
	ColumnKey = "key"
)

// Columns returns the column names that exchangeFrom, topicFrom and subjectFrom accept.
func Columns() []string { return []string{ColumnAggregateType, ColumnTopic, ColumnKey} }

// FromColumn returns the reader of an exchangeFrom, topicFrom or subjectFrom column: it
// returns the value of the column, as it is. An empty value is the caller's to refuse;
// ColumnAddress refuses it.
func FromColumn(column string) (func(Row) string, error) {
	switch column {
	case ColumnAggregateType:
		return func(r Row) string { return r.AggregateType }, nil
	case ColumnTopic:
		return func(r Row) string { return r.Topic }, nil
	case ColumnKey:
		return func(r Row) string { return r.Key }, nil
	}
	return nil, fmt.Errorf("%w: %q: use aggregate_type, topic or key", ErrUnknownColumn, column)
}

// Address is a compiled RabbitMQ exchange, Kafka topic or NATS subject: an address template
// or an address column. The zero value is not usable; build one with CompileAddress,
// ColumnAddress or NewAddress.
type Address struct {
	text   string
	parts  []part
	size   int
	column string
	read   func(Row) string
}

// CompileAddress compiles an address template: a literal name or a text with {{ ... }}
// placeholders. A placeholder with another name than topic, key, aggregateType,
// payload.<field> or data.<field> is an *UnknownPlaceholderError. A blank text is an error too,
// since every row would fail.
func CompileAddress(text string) (*Address, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("%w: the address template is blank", ErrEmptyAddress)
	}
	if err := ValidateAddress(text); err != nil {
		return nil, err
	}
	parts := parse(text)
	return &Address{text: text, parts: parts, size: literalSize(parts)}, nil
}

// ColumnAddress returns the address that exchangeFrom, topicFrom or subjectFrom names: the
// value of that column of each row, with no template.
func ColumnAddress(column string) (*Address, error) {
	read, err := FromColumn(column)
	if err != nil {
		return nil, err
	}
	return &Address{column: column, read: read}, nil
}

// NewAddress returns the address of a destination from its template (exchange, topic or
// subject) and its column (exchangeFrom, topicFrom or subjectFrom). A column, when set, wins
// and the template is not compiled.
func NewAddress(text, column string) (*Address, error) {
	if column != "" {
		return ColumnAddress(column)
	}
	return CompileAddress(text)
}

// String returns the template as written, or "column <name>" for a column address.
func (a *Address) String() string {
	if a.read != nil {
		return "column " + a.column
	}
	return a.text
}

// IsLiteral reports whether the address is a template without placeholders, so every row
// renders the same name.
func (a *Address) IsLiteral() bool {
	return a.read == nil && (len(a.parts) == 0 || (len(a.parts) == 1 && a.parts[0].kind == partLiteral))
}

// Render returns the address of row. {{ key }} and {{ aggregateType }} of a row without them,
// and a payload field that the row does not hold, render as empty strings. An address that is
// empty or only white space is an error that wraps ErrEmptyAddress and names the placeholders
// that found no value. Render does not trim a name that is not blank.
func (a *Address) Render(row Row) (string, error) {
	if a.read != nil {
		name := a.read(row)
		if strings.TrimSpace(name) == "" {
			return "", fmt.Errorf("%w: the column %s of the row is %s", ErrEmptyAddress, a.column, describeEmpty(name))
		}
		return name, nil
	}
	if a.IsLiteral() {
		return a.text, nil
	}
	var missing []string
	buf := make([]byte, 0, a.size+renderSlack)
	p := payload{raw: row.Payload}
	for _, pt := range a.parts {
		before := len(buf)
		switch pt.kind {
		case partLiteral:
			buf = append(buf, pt.text...)
		case partTopic:
			buf = append(buf, row.Topic...)
		case partKey:
			buf = append(buf, row.Key...)
		case partAggregateType:
			buf = append(buf, row.AggregateType...)
		case partPayload:
			if v, ok := p.field(pt.path); ok {
				buf = appendValue(buf, v)
			}
		}
		if pt.kind != partLiteral && len(buf) == before {
			missing = append(missing, pt.text)
		}
	}
	name := string(buf)
	if strings.TrimSpace(name) == "" {
		detail := ""
		if len(missing) > 0 {
			detail = " (no value for " + strings.Join(missing, ", ") + ")"
		}
		return "", fmt.Errorf("%w: the address template %q renders %s%s", ErrEmptyAddress, a.text, describeEmpty(name), detail)
	}
	return name, nil
}

// describeEmpty words an empty or blank name for an error.
func describeEmpty(name string) string {
	if name == "" {
		return "empty"
	}
	return fmt.Sprintf("only white space (%q)", name)
}
