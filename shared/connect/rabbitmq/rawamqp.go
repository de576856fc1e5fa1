//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// This file is a minimal AMQP 0-9-1 client of QueueBox's own, for the one thing that the
// client library cannot do: take the message at the head of a queue whose header table the
// library cannot decode (basic.get), without decoding that table, and then acknowledge or
// return it. It opens one connection with one channel, authenticates with PLAIN (or
// EXTERNAL over TLS when the URI asks for it), sends no heartbeats, and reads only the
// frames that its few methods answer with.

// The AMQP frame types, class and method identifiers that the raw client uses.
const (
	frameMethod    = 1
	frameHeader    = 2
	frameBody      = 3
	frameHeartbeat = 8
	frameEnd       = 0xCE

	classConnection = 10
	classChannel    = 20
	classBasic      = 60

	methodStart     = 10 // connection.start
	methodStartOk   = 11
	methodTune      = 30 // connection.tune
	methodTuneOk    = 31
	methodOpen      = 40 // connection.open
	methodOpenOk    = 41
	methodClose     = 50 // connection.close
	methodCloseOk   = 51
	methodChOpen    = 10 // channel.open
	methodChOpenOk  = 11
	methodChClose   = 40 // channel.close
	methodChCloseOk = 41
	methodGet       = 70 // basic.get
	methodGetOk     = 71
	methodGetEmpty  = 72
	methodAck       = 80 // basic.ack
	methodReject    = 90 // basic.reject

	// rawFrameMax is the largest frame the raw client accepts, lowered to the broker's frame
	// size when that is smaller: the AMQP client's own default frame size (RabbitMQ's default
	// frame_max), which it negotiates the same way, so a content header that reaches the
	// client reaches the raw client too.
	rawFrameMax = 131072
	rawChannel  = 1
)

// rawConn is one connection of the raw client, with its channel open.
type rawConn struct {
	conn     net.Conn
	r        *bufio.Reader
	frameMax uint32
	// timeout bounds each read and write, and end (when set) all of them.
	timeout time.Duration
	end     time.Time
}

// deadline is the deadline of the next read or write.
func (c *rawConn) deadline() time.Time {
	d := time.Now().Add(c.timeout)
	if !c.end.IsZero() && c.end.Before(d) {
		return c.end
	}
	return d
}

// rawMessage is a message that basic.get took: its delivery tag, its body, and its
// properties as far as the raw client reads them.
type rawMessage struct {
	tag           uint64
	body          []byte
	messageID     string
	correlationID string
	// headers is the field table of the headers property as the broker sent it (its
	// four-byte length, then its entries); nil when the message has none.
	headers []byte
}

// brokerError is a refusal that the broker sent with connection.close or channel.close.
type brokerError struct {
	code uint16
	text string
}

func (e *brokerError) Error() string {
	return "the broker closed the connection: " + strconv.Itoa(int(e.code)) + " " + e.text
}

// dialRaw connects to the broker of rawURL as the source does, and opens the channel.
// Every read and write must finish within timeout, and all of them by ctx's deadline.
func dialRaw(ctx context.Context, rawURL, name string, timeout time.Duration) (*rawConn, error) {
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)))
	if err != nil {
		return nil, err
	}
	external := slices.ContainsFunc(uri.AuthMechanism, func(m string) bool { return strings.EqualFold(m, "external") })
	if uri.Scheme == "amqps" {
		cfg, err := rawTLSConfig(uri)
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tls.Client(nc, cfg)
	}
	c := &rawConn{conn: nc, r: bufio.NewReader(nc), frameMax: rawFrameMax, timeout: timeout}
	c.end, _ = ctx.Deadline()
	if err := c.handshake(uri, name, external); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// rawTLSConfig is the TLS of an amqps URI: its server name (or host), its CA file and its
// client certificate, when it names them.
func rawTLSConfig(uri amqp.URI) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: uri.ServerName}
	if cfg.ServerName == "" {
		cfg.ServerName = uri.Host
	}
	if uri.CACertFile != "" {
		pem, err := os.ReadFile(uri.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file of the URI: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("the CA file of the URI holds no certificate")
		}
	}
	if uri.CertFile != "" && uri.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(uri.CertFile, uri.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate of the URI: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// handshake opens the connection (start, tune, open) and the channel.
func (c *rawConn) handshake(uri amqp.URI, name string, external bool) error {
	if err := c.write([]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}); err != nil {
		return err
	}
	args, err := c.expect(0, classConnection, methodStart)
	if err != nil {
		return err
	}
	var mechanisms string
	if _, err = args.take(2); err == nil { // version-major, version-minor
		if _, err = args.longstr(); err == nil { // server-properties
			mechanisms, err = args.longstr()
		}
	}
	if err != nil {
		return fmt.Errorf("reading connection.start: %w", err)
	}
	mechanism, response := "PLAIN", "\x00"+uri.Username+"\x00"+uri.Password
	if external {
		mechanism, response = "EXTERNAL", ""
	}
	if !slices.Contains(strings.Fields(mechanisms), mechanism) {
		return fmt.Errorf("the broker does not offer the %s mechanism (it offers %s)", mechanism, mechanisms)
	}
	var m encoder
	m.method(classConnection, methodStartOk)
	m.table(func(t *encoder) {
		t.entry("product", 'S', func(e *encoder) { e.longstr("QueueBox") })
		t.entry("connection_name", 'S', func(e *encoder) { e.longstr(name) })
		t.entry("capabilities", 'F', func(e *encoder) {
			e.table(func(t *encoder) { t.entry("authentication_failure_close", 't', func(e *encoder) { e.u8(1) }) })
		})
	})
	m.shortstr(mechanism)
	m.longstr(response)
	m.shortstr("en_US")
	if err := c.send(0, m.b); err != nil {
		return err
	}
	args, err = c.expect(0, classConnection, methodTune)
	if err != nil {
		return err
	}
	tune, err := args.take(8)
	if err != nil {
		return fmt.Errorf("reading connection.tune: %w", err)
	}
	if fm := binary.BigEndian.Uint32(tune[2:6]); fm > 0 && fm < rawFrameMax {
		c.frameMax = fm
	}
	m = encoder{}
	m.method(classConnection, methodTuneOk)
	m.u16(binary.BigEndian.Uint16(tune[0:2])) // channel-max as the broker offers it
	m.u32(c.frameMax)
	m.u16(0) // no heartbeats: the connection lives for a few round trips
	if err := c.send(0, m.b); err != nil {
		return err
	}
	m = encoder{}
	m.method(classConnection, methodOpen)
	m.shortstr(uri.Vhost)
	m.shortstr("")
	m.u8(0)
	if err := c.send(0, m.b); err != nil {
		return err
	}
	if _, err := c.expect(0, classConnection, methodOpenOk); err != nil {
		return err
	}
	m = encoder{}
	m.method(classChannel, methodChOpen)
	m.shortstr("")
	if err := c.send(rawChannel, m.b); err != nil {
		return err
	}
	_, err = c.expect(rawChannel, classChannel, methodChOpenOk)
	return err
}

// get takes the message at the head of queue, unacknowledged (basic.get with no-ack off).
// It returns nil when the queue holds no ready message.
func (c *rawConn) get(queue string) (*rawMessage, error) {
	var m encoder
	m.method(classBasic, methodGet)
	m.u16(0)
	m.shortstr(queue)
	m.u8(0)
	if err := c.send(rawChannel, m.b); err != nil {
		return nil, err
	}
	class, method, args, err := c.method(rawChannel)
	if err != nil {
		return nil, err
	}
	switch {
	case class == classBasic && method == methodGetEmpty:
		return nil, nil
	case class != classBasic || method != methodGetOk:
		return nil, fmt.Errorf("basic.get answered with method %d.%d", class, method)
	}
	tag, err := args.take(8)
	if err != nil {
		return nil, fmt.Errorf("reading basic.get-ok: %w", err)
	}
	msg := &rawMessage{tag: binary.BigEndian.Uint64(tag)}
	size, err := c.header(msg)
	if err != nil {
		return nil, err
	}
	msg.body = make([]byte, 0, min(size, 1<<20))
	for uint64(len(msg.body)) < size {
		typ, ch, payload, err := c.frame()
		if err != nil {
			return nil, err
		}
		if typ == frameHeartbeat {
			continue
		}
		if typ != frameBody || ch != rawChannel {
			return nil, fmt.Errorf("expected a body frame, got a frame of type %d", typ)
		}
		msg.body = append(msg.body, payload...)
	}
	if uint64(len(msg.body)) != size {
		return nil, fmt.Errorf("the body holds %d bytes, the header says %d", len(msg.body), size)
	}
	return msg, nil
}

// The property flags of the content header of the basic class, in their order.
const (
	flagContentType     = 0x8000
	flagContentEncoding = 0x4000
	flagHeaders         = 0x2000
	flagDeliveryMode    = 0x1000
	flagPriority        = 0x0800
	flagCorrelationID   = 0x0400
	flagReplyTo         = 0x0200
	flagExpiration      = 0x0100
	flagMessageID       = 0x0080
)

// header reads the content header frame of msg: the properties up to message-id, the header
// table kept as its bytes. It returns the body size.
func (c *rawConn) header(msg *rawMessage) (uint64, error) {
	for {
		typ, ch, payload, err := c.frame()
		if err != nil {
			return 0, err
		}
		if typ == frameHeartbeat {
			continue
		}
		if typ != frameHeader || ch != rawChannel {
			return 0, fmt.Errorf("expected a content header, got a frame of type %d", typ)
		}
		p := wire{b: payload}
		head, err := p.take(14) // class, weight, body size, property flags
		if err != nil {
			return 0, fmt.Errorf("reading the content header: %w", err)
		}
		size := binary.BigEndian.Uint64(head[4:12])
		flags := binary.BigEndian.Uint16(head[12:14])
		if err := readProperties(&p, flags, msg); err != nil {
			return 0, fmt.Errorf("reading the content header: %w", err)
		}
		return size, nil
	}
}

// readProperties reads the properties of flags from p into msg, up to message-id.
func readProperties(p *wire, flags uint16, msg *rawMessage) error {
	for _, f := range []uint16{flagContentType, flagContentEncoding, flagHeaders, flagDeliveryMode, flagPriority,
		flagCorrelationID, flagReplyTo, flagExpiration, flagMessageID} {
		if flags&f == 0 {
			continue
		}
		var err error
		switch f {
		case flagHeaders:
			var n []byte
			if n, err = p.take(4); err == nil {
				var entries []byte
				if entries, err = p.take(uint64(binary.BigEndian.Uint32(n))); err == nil {
					msg.headers = append(slices.Clip(n), entries...)
				}
			}
		case flagDeliveryMode, flagPriority:
			_, err = p.take(1)
		case flagCorrelationID:
			msg.correlationID, err = p.shortstr()
		case flagMessageID:
			msg.messageID, err = p.shortstr()
		default:
			_, err = p.shortstr()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ack acknowledges the message of tag (basic.ack). The broker answers nothing; close waits
// for the channel's close-ok, which follows the acknowledgement.
func (c *rawConn) ack(tag uint64) error {
	var m encoder
	m.method(classBasic, methodAck)
	m.u64(tag)
	m.u8(0)
	return c.send(rawChannel, m.b)
}

// requeue returns the message of tag to its queue (basic.reject with requeue).
func (c *rawConn) requeue(tag uint64) error {
	var m encoder
	m.method(classBasic, methodReject)
	m.u64(tag)
	m.u8(1)
	return c.send(rawChannel, m.b)
}

// close closes the channel and the connection, waiting for each close-ok, so that the
// acknowledgements sent before are handled when it returns nil; it always closes the socket.
func (c *rawConn) close() error {
	defer c.conn.Close()
	var m encoder
	m.method(classChannel, methodChClose)
	m.u16(200)
	m.shortstr("")
	m.u16(0)
	m.u16(0)
	if err := c.send(rawChannel, m.b); err != nil {
		return err
	}
	if _, err := c.expect(rawChannel, classChannel, methodChCloseOk); err != nil {
		return err
	}
	m = encoder{}
	m.method(classConnection, methodClose)
	m.u16(200)
	m.shortstr("")
	m.u16(0)
	m.u16(0)
	if err := c.send(0, m.b); err != nil {
		return err
	}
	_, err := c.expect(0, classConnection, methodCloseOk)
	return err
}

// expect reads the next method on channel ch and checks that it is class.method.
func (c *rawConn) expect(ch, class, method uint16) (*wire, error) {
	cl, me, args, err := c.method(ch)
	if err != nil {
		return nil, err
	}
	if cl != class || me != method {
		return nil, fmt.Errorf("expected method %d.%d, got %d.%d", class, method, cl, me)
	}
	return args, nil
}

// method reads the next method frame of channel ch, skipping heartbeats. A connection.close
// or channel.close of the broker is answered with its close-ok and returned as a
// *brokerError.
func (c *rawConn) method(ch uint16) (class, method uint16, args *wire, err error) {
	for {
		typ, fch, payload, err := c.frame()
		if err != nil {
			return 0, 0, nil, err
		}
		if typ == frameHeartbeat {
			continue
		}
		if typ != frameMethod {
			return 0, 0, nil, fmt.Errorf("expected a method frame, got a frame of type %d", typ)
		}
		w := &wire{b: payload}
		id, err := w.take(4)
		if err != nil {
			return 0, 0, nil, err
		}
		class, method = binary.BigEndian.Uint16(id[0:2]), binary.BigEndian.Uint16(id[2:4])
		if (class == classConnection && method == methodClose) || (class == classChannel && method == methodChClose) {
			code, _ := w.take(2)
			text, _ := w.shortstr()
			var ok encoder
			ok.method(class, method+1)
			_ = c.send(fch, ok.b)
			be := &brokerError{text: text}
			if len(code) == 2 {
				be.code = binary.BigEndian.Uint16(code)
			}
			return 0, 0, nil, be
		}
		if fch != ch {
			return 0, 0, nil, fmt.Errorf("expected a method on channel %d, got one on channel %d", ch, fch)
		}
		return class, method, w, nil
	}
}

// frame reads one frame: its type, channel and payload.
func (c *rawConn) frame() (typ byte, ch uint16, payload []byte, err error) {
	if err := c.conn.SetReadDeadline(c.deadline()); err != nil {
		return 0, 0, nil, err
	}
	var head [7]byte
	if _, err := io.ReadFull(c.r, head[:]); err != nil {
		return 0, 0, nil, fmt.Errorf("reading a frame: %w", err)
	}
	size := binary.BigEndian.Uint32(head[3:7])
	if size > c.frameMax {
		return 0, 0, nil, fmt.Errorf("a frame of %d bytes exceeds the frame size %d", size, c.frameMax)
	}
	payload = make([]byte, size+1)
	if _, err := io.ReadFull(c.r, payload); err != nil {
		return 0, 0, nil, fmt.Errorf("reading a frame: %w", err)
	}
	if payload[size] != frameEnd {
		return 0, 0, nil, errors.New("a frame does not end with the frame-end octet")
	}
	return head[0], binary.BigEndian.Uint16(head[1:3]), payload[:size], nil
}

// send writes one method frame on channel ch.
func (c *rawConn) send(ch uint16, payload []byte) error {
	f := make([]byte, 0, len(payload)+8)
	f = append(f, frameMethod)
	f = binary.BigEndian.AppendUint16(f, ch)
	f = binary.BigEndian.AppendUint32(f, uint32(len(payload)))
	f = append(f, payload...)
	return c.write(append(f, frameEnd))
}

func (c *rawConn) write(b []byte) error {
	if err := c.conn.SetWriteDeadline(c.deadline()); err != nil {
		return err
	}
	_, err := c.conn.Write(b)
	return err
}

// wire reads the arguments of a method or the properties of a content header.
type wire struct {
	b []byte
}

func (w *wire) take(n uint64) ([]byte, error) {
	if n > uint64(len(w.b)) {
		return nil, io.ErrUnexpectedEOF
	}
	out := w.b[:n]
	w.b = w.b[n:]
	return out, nil
}

func (w *wire) shortstr() (string, error) {
	n, err := w.take(1)
	if err != nil {
		return "", err
	}
	s, err := w.take(uint64(n[0]))
	return string(s), err
}

func (w *wire) longstr() (string, error) {
	n, err := w.take(4)
	if err != nil {
		return "", err
	}
	s, err := w.take(uint64(binary.BigEndian.Uint32(n)))
	return string(s), err
}

// encoder writes the arguments of a method.
type encoder struct {
	b []byte
}

func (e *encoder) method(class, method uint16) {
	e.u16(class)
	e.u16(method)
}

func (e *encoder) u8(v byte)    { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }

// shortstr writes s as a short string, cut to its 255 bytes at most.
func (e *encoder) shortstr(s string) {
	s = s[:min(len(s), 255)]
	e.u8(byte(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) longstr(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
}

// table writes a field table whose entries fill writes.
func (e *encoder) table(fill func(t *encoder)) {
	var t encoder
	fill(&t)
	e.u32(uint32(len(t.b)))
	e.b = append(e.b, t.b...)
}

// entry writes one table entry: its name, its type octet and its value.
func (e *encoder) entry(name string, typ byte, value func(e *encoder)) {
	e.shortstr(name)
	e.u8(typ)
	value(e)
}
