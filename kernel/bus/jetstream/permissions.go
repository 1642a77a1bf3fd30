package jetstream

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// StorePermissions is what one host of a shared stream may do on a NATS
// server ([HostPermissions] gives them): append on its own subject,
// PREFIX.log.HOST, and nothing else, and read the stream through the
// JetStream API calls a [Store] makes. It is written once, here,
// for the users an embedded server gives its peers and for the block
// `kairo store permissions HOST` prints for an operator's own cluster: a host's identity comes from the credentials the
// server checks, never from what the host writes
// (docs/RATIONALE.md#a-hosts-identity-is-its-subject).
//
// The subjects are those of nats.go's jetstream package (api.go): a host
// reads by stream info, message get (direct or through the API) and
// ordered consumers, which it creates, asks for messages and deletes. It
// may not delete or purge messages, nor create, update or delete streams:
// what another host wrote stays as it was written. A push consumer cannot
// deliver onto the log's subjects (the server refuses a deliver subject
// its stream takes: "forms a cycle").
type StorePermissions struct {
	// Publish is what the host may publish on: its log subject and the
	// API requests.
	Publish []string
	// DenyPublish spells out what Publish already leaves out, the API
	// calls that change or remove what is stored, so that a later widening
	// of Publish cannot let them through.
	DenyPublish []string
	// Subscribe is where the host receives: its own inboxes
	// (InboxPrefix), where the server's replies and a consumer's messages
	// arrive. Not the other hosts': a host that could subscribe to them
	// would see their traffic, and could learn an inbox to point a push
	// consumer at.
	Subscribe []string
}

// HostPermissions is the [StorePermissions] of host on the stream, whose
// subjects start with prefix.
func HostPermissions(stream, prefix, host string) StorePermissions {
	api := "$JS.API."
	return StorePermissions{
		Publish: []string{
			hostSubject(prefix, host),
			api + "INFO",
			api + "STREAM.INFO." + stream,
			api + "STREAM.MSG.GET." + stream,
			api + "DIRECT.GET." + stream,
			api + "DIRECT.GET." + stream + ".>",
			// CREATE.STREAM.NAME and CREATE.STREAM.NAME.FILTER (a filter
			// has dots of its own).
			api + "CONSUMER.CREATE." + stream + ".>",
			api + "CONSUMER.INFO." + stream + ".*",
			api + "CONSUMER.DELETE." + stream + ".*",
			api + "CONSUMER.MSG.NEXT." + stream + ".*",
			"$JS.FC." + stream + ".>",
			"$JS.ACK." + stream + ".>",
		},
		DenyPublish: []string{
			api + "STREAM.CREATE.>",
			api + "STREAM.UPDATE.>",
			api + "STREAM.DELETE.>",
			api + "STREAM.PURGE.>",
			api + "STREAM.MSG.DELETE.>",
		},
		Subscribe: []string{InboxPrefix(host) + ".>"},
	}
}

// InboxPrefix is the prefix of the inboxes of host's connection, its own
// so that permissions can keep each host to its own: "_INBOX_NAME", a dot
// of the name as "~" (which no host name holds, so that no host's inboxes
// fall under another's); "_INBOX" for a host of no name.
func InboxPrefix(host string) string {
	if host == "" {
		return "_INBOX"
	}
	return "_INBOX_" + strings.ReplaceAll(host, ".", "~")
}

// server is p as a nats-server user's permissions.
func (p StorePermissions) server() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.Publish, Deny: p.DenyPublish},
		Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
	}
}

// AuthorizationBlock is the nats-server configuration of one user, host,
// with these permissions and the password PASSWORD stands for: the block
// an operator pastes into the authorization { users = [...] } of their
// cluster's server configuration.
func (p StorePermissions) AuthorizationBlock(host, password string) string {
	var b strings.Builder
	list := func(subjects []string) string {
		q := make([]string, len(subjects))
		for i, s := range subjects {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	fmt.Fprintf(&b, "authorization {\n  users = [\n    {\n      user: %q\n      password: %q\n      permissions: {\n", host, password)
	fmt.Fprintf(&b, "        publish: {\n          allow: %s\n          deny: %s\n        }\n", list(p.Publish), list(p.DenyPublish))
	fmt.Fprintf(&b, "        subscribe: {\n          allow: %s\n        }\n", list(p.Subscribe))
	b.WriteString("      }\n    }\n  ]\n}\n")
	return b.String()
}
