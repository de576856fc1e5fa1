package redact

import (
	"regexp"
	"sync"
)

var (
	urlUserInfo = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(://[^/?#;@\s]*?:)([^/?#;\s]*)@`)
	})
	urlPasswordParam = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)([?&;](?:password|pwd|passwd|sslpassword)=)(\{(?:[^}]|\}\})*\}|[^&;#\s]*)`)
	})
)

// URL returns raw with its password masked as ***: the password of the user info
// (amqp://user:***@host) and the value of a password or pwd parameter (?password=***,
// ;password=***). Text without a password stays as it is. config.MaskURL is this function.
func URL(raw string) string {
	s := urlUserInfo().ReplaceAllString(raw, "${1}***@")
	return urlPasswordParam().ReplaceAllString(s, "${1}***")
}
