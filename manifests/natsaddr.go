package manifests

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// RedactURL is a server URL, or several separated by commas, with each
// password (or token) replaced by "xxxxx": nats://user:xxxxx@host:4222.
// What cannot be parsed is replaced whole where it holds an "@".
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		trimmed := strings.TrimSpace(p)
		u, err := url.Parse(trimmed)
		switch {
		case err != nil || u.Host == "" && strings.Contains(trimmed, "@"):
			if strings.Contains(trimmed, "@") {
				parts[i] = "xxxxx@" + trimmed[strings.LastIndexByte(trimmed, '@')+1:]
			}
		case u.User == nil:
		case hasPassword(u.User):
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			parts[i] = u.String()
		default:
			// A user alone is a token.
			u.User = url.User("xxxxx")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

func hasPassword(u *url.Userinfo) bool { _, ok := u.Password(); return ok }

// Loopback reports whether addr (HOST:PORT) is on a loopback address:
// 127.0.0.0/8, ::1 or "localhost".
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
