package config

import (
	"strconv"
	"strings"
)

// EnvPrefix is the prefix of every configuration variable.
const EnvPrefix = "QUEUEBOX_"

// ConfigFileVariable names the configuration file. It is not a configuration key.
const ConfigFileVariable = "QUEUEBOX_CONFIG_FILE"

// keyPath is the path of a key, one element per level. A list index is stored as "[n]".
type keyPath []string

// child returns the path of key name under p.
func (p keyPath) child(name string) keyPath {
	out := make(keyPath, len(p), len(p)+1)
	copy(out, p)
	return append(out, name)
}

// index returns the path of list element i under p.
func (p keyPath) index(i int) keyPath {
	return p.child("[" + strconv.Itoa(i) + "]")
}

// String returns the dotted path, for example routes[0].topicPattern.
func (p keyPath) String() string {
	var b strings.Builder
	for i, seg := range p {
		if i > 0 && !isIndexSegment(seg) {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// envVar returns the QUEUEBOX_ variable of the path.
func (p keyPath) envVar() string {
	parts := make([]string, len(p))
	for i, seg := range p {
		if isIndexSegment(seg) {
			parts[i] = seg[1 : len(seg)-1]
			continue
		}
		parts[i] = strings.ReplaceAll(strings.ToUpper(seg), "_", "__")
	}
	return EnvPrefix + strings.Join(parts, "_")
}

func isIndexSegment(seg string) bool {
	if len(seg) < 3 || seg[0] != '[' || seg[len(seg)-1] != ']' {
		return false
	}
	return isDigits(seg[1 : len(seg)-1])
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseKeyPath splits a dotted key path such as destinations.my_api.baseUrl or
// routes[0].topicPattern into its levels. A level that is only digits becomes a list index.
func parseKeyPath(path string) keyPath {
	var p keyPath
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			open := strings.IndexByte(part, '[')
			if open < 0 {
				p = appendLevel(p, part)
				break
			}
			if open > 0 {
				p = appendLevel(p, part[:open])
			}
			end := strings.IndexByte(part[open:], ']')
			if end < 0 {
				p = appendLevel(p, part[open:])
				break
			}
			p = append(p, part[open:open+end+1])
			part = part[open+end+1:]
		}
	}
	return p
}

func appendLevel(p keyPath, level string) keyPath {
	if isDigits(level) {
		return append(p, "["+level+"]")
	}
	return append(p, level)
}

// EnvVarName returns the QUEUEBOX_ variable that sets a key path, by the inverse of the naming
// rule of spec/24-environment-variables.md: each level in upper case, a _ inside a level written
// as __, a list index as its number, levels joined by _. For example
// destinations.my_api.baseUrl gives QUEUEBOX_DESTINATIONS_MY__API_BASEURL and
// routes[0].topicPattern gives QUEUEBOX_ROUTES_0_TOPICPATTERN.
func EnvVarName(path string) string {
	return parseKeyPath(path).envVar()
}

// EnvKeyPath returns the key path that a QUEUEBOX_ variable sets, by the naming rule of
// spec/24-environment-variables.md: the prefix removed, __ turned into a literal _, every other
// _ a level, all in lower case, and a level of digits a list index. For example
// QUEUEBOX_DESTINATIONS_MY__API_BASEURL gives destinations.my_api.baseurl. The result is false
// when name does not start with QUEUEBOX_, names the configuration file, or has an empty level.
func EnvKeyPath(name string) (string, bool) {
	p, ok := envKeyPath(name)
	if !ok {
		return "", false
	}
	return p.String(), true
}

// envKeyPath is EnvKeyPath with the levels kept apart.
func envKeyPath(name string) (keyPath, bool) {
	if !strings.HasPrefix(name, EnvPrefix) || name == ConfigFileVariable {
		return nil, false
	}
	rest := name[len(EnvPrefix):]
	var (
		p   keyPath
		cur strings.Builder
	)
	for i := 0; i < len(rest); i++ {
		if rest[i] != '_' {
			cur.WriteByte(rest[i])
			continue
		}
		if i+1 < len(rest) && rest[i+1] == '_' {
			cur.WriteByte('_')
			i++
			continue
		}
		if cur.Len() == 0 {
			return nil, false
		}
		p = appendLevel(p, strings.ToLower(cur.String()))
		cur.Reset()
	}
	if cur.Len() == 0 {
		return nil, false
	}
	return appendLevel(p, strings.ToLower(cur.String())), true
}
