package domain

import "strings"

// Role is a tenant's side of a tenant-isolation incident.
type Role string

// The two sides of the notification list.
const (
	// Received: the tenant was answered from KV pages it did not write —
	// it received data built from someone else's prompt or output.
	Received Role = "received"
	// Exposed: the tenant's prompt or output sat in pages that another
	// tenant's request was decoded from.
	Exposed Role = "exposed"
)

// Roles lists the roles in the order the notification list shows them:
// who received foreign data first.
var Roles = []Role{Received, Exposed}

// Rank orders roles: received is 0.
func (r Role) Rank() int {
	for i, v := range Roles {
		if v == r {
			return i
		}
	}
	return len(Roles)
}

// Label is the phrase a person reads.
func (r Role) Label() string {
	switch r {
	case Received:
		return "received foreign data"
	case Exposed:
		return "data possibly exposed"
	}
	return string(r)
}

// ParseRole accepts the canonical spelling and, for input only, the long
// spellings earlier versions used in URLs and exports
// ("received_foreign_data", "possibly_exposed"). Output always uses the
// canonical one. An empty string is the zero Role (no filter).
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return "", nil
	case "received", "received_foreign_data":
		return Received, nil
	case "exposed", "possibly_exposed":
		return Exposed, nil
	}
	return "", Errorf(Invalid, "unknown role %q (want received or exposed)", s)
}
