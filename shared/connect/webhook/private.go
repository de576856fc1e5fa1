package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// ErrPrivateAddress is the cause of a URL refused by CheckPrivateAddresses.
var ErrPrivateAddress = errors.New("webhook: private address refused")

// The address classes that http.blockPrivateAddresses refuses.
var (
	siteLocal4 = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
	}
	siteLocal6   = netip.MustParsePrefix("fec0::/10")
	uniqueLocal6 = netip.MustParsePrefix("fc00::/7")
	thisNetwork4 = netip.MustParsePrefix("0.0.0.0/8")
	// IPv6 forms that carry an IPv4 address in their last 32 bits and reach it: the
	// deprecated IPv4-compatible form and the NAT64 well-known prefix.
	ipv4Compatible = netip.MustParsePrefix("::/96")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
)

// CheckPrivateAddresses implements http.blockPrivateAddresses for one URL (a destination
// baseUrl or an OAuth2 tokenUrl). It refuses the URL when its host is, or resolves through
// resolver (nil means net.DefaultResolver) to, an address of one of these classes:
// unspecified (0.0.0.0/8, ::), loopback (127.0.0.0/8, ::1, and the names localhost and
// *.localhost without a lookup), link-local (169.254.0.0/16, fe80::/10), site-local (10/8,
// 172.16/12, 192.168/16, fec0::/10) or unique-local (fc00::/7); IPv4 addresses are also
// recognised inside IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6 addresses.
//
// A host that does not resolve passes, as the specification requires; a lookup cut short by
// ctx returns ctx's error. The error wraps ErrPrivateAddress and names the host, the class and
// the address.
//
// The check runs at start. The publisher resolves the host again for every connection, so
// with Config.BlockPrivateAddresses it also checks the address of each connection when it is
// dialled (DNS rebinding).
func CheckPrivateAddresses(ctx context.Context, rawURL string, resolver *net.Resolver) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("checking the address of a URL: %w", stripURL(err))
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("checking the address of a URL: the URL has no host")
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if class := addressClass(addr); class != "" {
			return fmt.Errorf("%w: host %s is a %s address", ErrPrivateAddress, host, class)
		}
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: these names are loopback whatever a resolver says.
		return fmt.Errorf("%w: host %s is a loopback name", ErrPrivateAddress, host)
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("resolving host %s: %w", host, ctx.Err())
		}
		return nil
	}
	for _, addr := range addrs {
		if class := addressClass(addr); class != "" {
			return fmt.Errorf("%w: host %s resolves to %s address %s", ErrPrivateAddress, host, class, addr)
		}
	}
	return nil
}

// addressClass returns the class of a refused address, or "" for an address that may be
// called.
func addressClass(addr netip.Addr) string {
	addr = addr.WithZone("").Unmap()
	if addr.Is6() && !addr.IsUnspecified() && !addr.IsLoopback() &&
		(ipv4Compatible.Contains(addr) || nat64.Contains(addr)) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case addr.IsUnspecified() || thisNetwork4.Contains(addr):
		return "unspecified"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case siteLocal6.Contains(addr):
		return "site-local"
	case uniqueLocal6.Contains(addr):
		return "unique-local"
	}
	for _, p := range siteLocal4 {
		if p.Contains(addr) {
			return "site-local"
		}
	}
	return ""
}

// guardedDialer implements Config.BlockPrivateAddresses at dial time: its dialer's Control
// hook sees the address each connection is about to reach, after the name was resolved, and
// refuses one of the classes that CheckPrivateAddresses refuses. A name that resolved to a
// public address at start and resolves to a private one later (DNS rebinding) is therefore
// refused before a byte is sent.
type guardedDialer struct {
	dialer *net.Dialer
	// proxies holds the host:port of the proxies that the environment names for the
	// publisher's URLs. Those connections are not checked: the operator chose the proxy, and
	// the proxy, not QueueBox, resolves the destination's host.
	proxies map[string]bool
}

// newGuardedDialer returns the guarded dialer over d for a publisher that calls urls.
func newGuardedDialer(d *net.Dialer, urls ...string) *guardedDialer {
	g := &guardedDialer{dialer: d, proxies: map[string]bool{}}
	for _, raw := range urls {
		if addr := proxyAddr(raw); addr != "" {
			g.proxies[addr] = true
		}
	}
	return g
}

// DialContext dials addr and refuses a connection to a private address. addr is the host and
// port the transport asked for, before resolution.
func (g *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.proxies[addr] {
		return g.dialer.DialContext(ctx, network, addr)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	d := *g.dialer
	d.Control = func(_, address string, _ syscall.RawConn) error {
		return checkDialedAddress(host, address)
	}
	return d.DialContext(ctx, network, addr)
}

// checkDialedAddress returns an error wrapping ErrPrivateAddress when address, the ip:port
// that a connection to host is about to reach, is of a refused class. An address that cannot
// be read is refused too.
func checkDialedAddress(host, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: host %s: the address %q of the connection cannot be checked", ErrPrivateAddress, host, address)
	}
	addr := ap.Addr()
	class := addressClass(addr)
	if class == "" {
		return nil
	}
	if lit, err := netip.ParseAddr(host); err == nil && lit.WithZone("") == addr.WithZone("") {
		return fmt.Errorf("%w: host %s is a %s address", ErrPrivateAddress, host, class)
	}
	return fmt.Errorf("%w: host %s resolves to %s address %s", ErrPrivateAddress, host, class, addr.WithZone(""))
}

// proxyAddr returns the host:port of the proxy that the environment names for rawURL, as
// the transport dials it, or "" when there is none.
func proxyAddr(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	if err != nil || proxy == nil || proxy.Hostname() == "" {
		return ""
	}
	port := proxy.Port()
	if port == "" {
		switch proxy.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(proxy.Hostname(), port)
}
