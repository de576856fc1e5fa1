package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
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
// The check runs once, at start: the publisher resolves the host again on every request.
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
