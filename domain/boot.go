package domain

import (
	"sort"
	"strings"
	"time"
)

// Boot is one engine start and the limits in force until the node's next
// boot (node_boots, latest version of each row).
type Boot struct {
	Node, Role         string
	At                 time.Time
	AtNs               uint64
	ID                 string
	Version            string
	Mode               string
	PageSize           uint64
	ContextLen         uint64
	MaxTotalTokens     uint64
	MaxReqInputLen     uint64
	KVPool             uint64
	DPSize             uint64
	AutoTruncate       bool
	Args               map[string]string
	Lines              []uint64
	Next               *Boot // the node's next boot, nil if last
	HasLimits, HasPage bool
}

// End is when the boot stopped being in force (the next boot), or zero.
func (b *Boot) End() time.Time {
	if b.Next == nil {
		return time.Time{}
	}
	return b.Next.At
}

// Limit is the prompt length at or above which the scheduler rejects a
// request (reference §c1: len >= max_req_input_len).
func (b *Boot) Limit() uint64 { return b.MaxReqInputLen }

// Host is the node's address from server_args (host=...), if logged.
func (b *Boot) Host() string { return strings.Trim(b.Args["host"], "'\"") }

// FollowsRoom reports whether the DP rank is bootstrap_room % dp_size
// (load_balance_method='follow_bootstrap_room', reference §e).
func (b *Boot) FollowsRoom() bool {
	if b.DPSize <= 1 {
		return true
	}
	m := strings.Trim(b.Args["load_balance_method"], "'\"")
	return m == "" || m == "follow_bootstrap_room"
}

// Boots indexes boots by node, each node's in time order.
type Boots struct {
	ByNode map[string][]*Boot
}

// NewBoots indexes boots given in (node, time) order and links each to the
// node's next boot.
func NewBoots(list []*Boot) *Boots {
	bs := &Boots{ByNode: map[string][]*Boot{}}
	for _, b := range list {
		bs.ByNode[b.Node] = append(bs.ByNode[b.Node], b)
	}
	for _, l := range bs.ByNode {
		for i := 0; i+1 < len(l); i++ {
			l[i].Next = l[i+1]
		}
	}
	return bs
}

// At returns the boot in force on node at t (the latest boot at or before
// t), or nil when none is known.
func (bs *Boots) At(node string, t time.Time) *Boot {
	list := bs.ByNode[node]
	i := sort.Search(len(list), func(i int) bool { return list[i].At.After(t) })
	if i == 0 {
		return nil
	}
	return list[i-1]
}

// Nodes returns the node names in order.
func (bs *Boots) Nodes() []string {
	out := make([]string, 0, len(bs.ByNode))
	for n := range bs.ByNode {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
