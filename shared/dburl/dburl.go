// Package dburl is database.url taken apart: the dialect-neutral form (URL, Host, Param) that
// each dialect's parser (shared/store/postgres, shared/store/sqlserver) returns and that the
// configuration's checks read. It imports nothing of QueueBox, so that shared/config can read
// a parsed URL without linking a database driver.
package dburl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Host is one host of a database URL.
type Host struct {
	// Name is the host name or address, without brackets.
	Name string
	// Port is the port: the one in the URL, or the dialect's default (5432, 1433).
	Port int
}

// String returns host:port, with brackets around an IPv6 address.
func (h Host) String() string {
	return net.JoinHostPort(h.Name, strconv.Itoa(h.Port))
}

// Param is one parameter of a database URL.
type Param struct {
	Name  string
	Value string
}

// URL is database.url taken apart by its dialect's parser. Password is the password that the
// URL carries: never log it.
type URL struct {
	// Dialect is the dialect that the scheme names, as database.type spells it.
	Dialect string
	// Native is true for a postgres://, postgresql:// or sqlserver:// URL, false for a JDBC URL.
	Native bool
	// Hosts lists the hosts, in order.
	Hosts []Host
	// Database is the database name, empty when the URL names none.
	Database string
	// Instance is the SQL Server instance name, empty when the URL names none.
	Instance string
	// User is the user name that the URL itself carries, if any.
	User string
	// Password is the password that the URL itself carries, if any.
	Password string
	// Params lists the other parameters, in URL order, with their names as written.
	Params []Param
}

// Param returns the value of the parameter name, matched in any letter case.
func (u URL) Param(name string) (string, bool) {
	for _, p := range u.Params {
		if strings.EqualFold(p.Name, name) {
			return p.Value, true
		}
	}
	return "", false
}

// SetUserInfo sets User and Password from the percent-encoded user[:password] of a URL.
func (u *URL) SetUserInfo(info string) error {
	user, pass, hasPass := strings.Cut(info, ":")
	var err error
	if u.User, err = url.PathUnescape(user); err != nil {
		return fmt.Errorf("has a badly escaped user name: %w", err)
	}
	if hasPass {
		p, err := url.PathUnescape(pass)
		if err != nil {
			return errors.New("has a badly escaped password")
		}
		u.Password = p
	}
	return nil
}

// AddParam records a parameter; user and password (any letter case) go to User and Password.
func (u *URL) AddParam(name, value string) {
	switch strings.ToLower(name) {
	case "user":
		u.User = value
	case "password":
		u.Password = value
	default:
		u.Params = append(u.Params, Param{Name: name, Value: value})
	}
}

// Credentials returns user and password, or those of the URL when they are empty.
func (u URL) Credentials(user, password string) (string, string) {
	if user == "" {
		user = u.User
	}
	if password == "" {
		password = u.Password
	}
	return user, password
}

// ErrPort refuses a port that is not a number from 1 to 65535. It quotes no part of the URL:
// the text where a port is expected can be a piece of a password that holds a /, ? or ;
// (user:Pa55/word@db reads as host "user" and port "Pa55").
var ErrPort = errors.New("has a port that is not a number from 1 to 65535 (a password that holds /, ?, ; or @ must be percent-encoded, or given in database.password)")

// ParseHost parses host, host:port, [v6] or [v6]:port; defaultPort is the port of a host
// without one.
func ParseHost(s string, defaultPort int) (Host, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Host{}, errors.New("names an empty host")
	}
	name, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Host{}, errors.New("has an unclosed [ in a host")
		}
		name, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
	case strings.Count(s, ":") == 1:
		name, port, _ = strings.Cut(s, ":")
	}
	h := Host{Name: name, Port: defaultPort}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return Host{}, ErrPort
		}
		h.Port = p
	}
	if h.Name == "" {
		return Host{}, errors.New("names an empty host")
	}
	return h, nil
}
