package webhook_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
)

// offlineResolver fails every DNS query without sending it anywhere, so that a test that
// passes it can never cause network traffic.
func offlineResolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no DNS in tests")
		},
	}
}

// fakeDNS serves A and AAAA answers for records on a loopback UDP socket and answers
// NXDOMAIN for every other name. The returned resolver sends every query to it.
func fakeDNS(t *testing.T, records map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	return serveDNS(t, func(name string) ([]netip.Addr, bool) {
		addrs, known := records[name]
		return addrs, known
	})
}

// serveDNS serves the answers of lookup (the addresses of a lower-case name, and whether the
// name exists) on a loopback UDP socket. The returned resolver sends every query to it.
func serveDNS(t *testing.T, lookup func(name string) ([]netip.Addr, bool)) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], lookup); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", pc.LocalAddr().String())
		},
	}
}

// dnsAnswer builds the response to one DNS query (RFC 1035 wire format).
func dnsAnswer(query []byte, lookup func(name string) ([]netip.Addr, bool)) []byte {
	if len(query) < 12 {
		return nil
	}
	i := 12
	var labels []string
	for {
		if i >= len(query) {
			return nil
		}
		l := int(query[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(query) {
			return nil
		}
		labels = append(labels, string(query[i:i+l]))
		i += l
	}
	if i+4 > len(query) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(query[i:])
	i += 4
	question := query[12:i]
	addrs, known := lookup(strings.ToLower(strings.Join(labels, ".")))

	var answers [][]byte
	for _, a := range addrs {
		var rdata []byte
		switch {
		case qtype == 1 && a.Is4():
			b := a.As4()
			rdata = b[:]
		case qtype == 28 && a.Is6():
			b := a.As16()
			rdata = b[:]
		default:
			continue
		}
		rr := []byte{0xc0, 0x0c} // the name of the question
		rr = binary.BigEndian.AppendUint16(rr, qtype)
		rr = binary.BigEndian.AppendUint16(rr, 1) // IN
		rr = binary.BigEndian.AppendUint32(rr, 60)
		rr = binary.BigEndian.AppendUint16(rr, uint16(len(rdata)))
		answers = append(answers, append(rr, rdata...))
	}
	flags := uint16(0x8180) // response, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	resp := append([]byte(nil), query[0:2]...)
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = binary.BigEndian.AppendUint16(resp, 1)
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(answers)))
	resp = binary.BigEndian.AppendUint16(resp, 0)
	resp = binary.BigEndian.AppendUint16(resp, 0)
	resp = append(resp, question...)
	for _, a := range answers {
		resp = append(resp, a...)
	}
	return resp
}

func TestCheckPrivateAddressesLiterals(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		url     string
		wantErr string // empty: allowed
	}{
		{name: "IPv4 loopback", url: "http://127.0.0.1:8080/events", wantErr: "host 127.0.0.1 is a loopback address"},
		{name: "other IPv4 loopback", url: "http://127.8.9.10", wantErr: "loopback"},
		{name: "IPv6 loopback", url: "http://[::1]:8080/", wantErr: "host ::1 is a loopback address"},
		{name: "10/8", url: "https://10.1.2.3/", wantErr: "host 10.1.2.3 is a site-local address"},
		{name: "192.168/16", url: "https://192.168.1.1/", wantErr: "site-local"},
		{name: "172.16/12 start", url: "https://172.16.0.1/", wantErr: "site-local"},
		{name: "172.16/12 end", url: "https://172.31.255.255/", wantErr: "site-local"},
		{name: "metadata address", url: "http://169.254.169.254/latest/meta-data", wantErr: "host 169.254.169.254 is a link-local address"},
		{name: "unique-local", url: "http://[fd00::1]/", wantErr: "host fd00::1 is a unique-local address"},
		{name: "fc00::/7 lower half", url: "http://[fc00::5]/", wantErr: "unique-local"},
		{name: "IPv6 link-local", url: "http://[fe80::1]/", wantErr: "link-local"},
		{name: "IPv6 link-local with zone", url: "http://[fe80::1%25eth0]:80/", wantErr: "link-local"},
		{name: "IPv6 site-local", url: "http://[fec0::1]/", wantErr: "site-local"},
		{name: "IPv4 unspecified", url: "http://0.0.0.0:8080/", wantErr: "unspecified"},
		{name: "IPv6 unspecified", url: "http://[::]/", wantErr: "unspecified"},
		{name: "IPv4-mapped loopback", url: "http://[::ffff:127.0.0.1]/", wantErr: "loopback"},
		{name: "IPv4-mapped private", url: "http://[::ffff:10.0.0.1]/", wantErr: "site-local"},
		{name: "IPv4-mapped metadata", url: "http://[::ffff:a9fe:a9fe]/", wantErr: "link-local"},
		{name: "NAT64 of a private address", url: "http://[64:ff9b::a00:1]/", wantErr: "site-local"},
		{name: "localhost", url: "http://localhost:9000/", wantErr: "host localhost is a loopback name"},
		{name: "localhost in capitals with a root dot", url: "http://LOCALHOST./", wantErr: "loopback name"},
		{name: "subdomain of localhost", url: "http://api.localhost/", wantErr: "loopback name"},
		{name: "public IPv4", url: "https://93.184.216.34/"},
		{name: "public IPv6", url: "https://[2606:2800:220:1:248:1893:25c8:1946]/"},
		{name: "just outside 172.16/12", url: "https://172.32.0.1/"},
		{name: "IPv4-mapped public", url: "http://[::ffff:93.184.216.34]/"},
		{name: "name that does not resolve passes", url: "https://api.partner.invalid/webhooks"},
	}
	resolver := offlineResolver()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := webhook.CheckPrivateAddresses(context.Background(), tt.url, resolver)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, webhook.ErrPrivateAddress)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestCheckPrivateAddressesResolvesNames(t *testing.T) {
	t.Parallel()

	resolver := fakeDNS(t, map[string][]netip.Addr{
		"private.test":     {netip.MustParseAddr("10.0.0.7")},
		"mixed.test":       {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("fd12::1")},
		"mapped.test":      {netip.MustParseAddr("::ffff:192.168.1.1")},
		"metadata.test":    {netip.MustParseAddr("169.254.169.254")},
		"public.test":      {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1:248:1893:25c8:1946")},
		"empty.test":       {},
		"loopback6.test":   {netip.MustParseAddr("::1")},
		"unspecified.test": {netip.MustParseAddr("0.0.0.0")},
	})
	tests := []struct {
		name    string
		url     string
		wantErr string
	}{
		{name: "private", url: "https://private.test/events", wantErr: "host private.test resolves to site-local address 10.0.0.7"},
		{name: "one private address among public ones", url: "https://mixed.test/", wantErr: "unique-local address fd12::1"},
		{name: "IPv4-mapped answer", url: "https://mapped.test/", wantErr: "site-local"},
		{name: "metadata", url: "http://metadata.test/", wantErr: "link-local address 169.254.169.254"},
		{name: "IPv6 loopback", url: "http://loopback6.test/", wantErr: "loopback address ::1"},
		{name: "unspecified", url: "http://unspecified.test/", wantErr: "unspecified address 0.0.0.0"},
		{name: "public", url: "https://public.test/events"},
		{name: "no address", url: "https://empty.test/"},
		{name: "unknown name passes", url: "https://unknown.test/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := webhook.CheckPrivateAddresses(context.Background(), tt.url, resolver)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, webhook.ErrPrivateAddress)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestCheckPrivateAddressesBadInput(t *testing.T) {
	t.Parallel()

	err := webhook.CheckPrivateAddresses(context.Background(), "https://", offlineResolver())
	require.Error(t, err)
	assert.NotErrorIs(t, err, webhook.ErrPrivateAddress)

	err = webhook.CheckPrivateAddresses(context.Background(), "https://u:pa55word@[::1", offlineResolver())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "pa55word")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = webhook.CheckPrivateAddresses(ctx, "https://private.example.com/", offlineResolver())
	require.ErrorIs(t, err, context.Canceled, "a lookup cut short is not a pass")
}
