package analyze

import (
	"context"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// PageRead is a decode read of pages whose last write (on the same node and
// DP rank since the node booted) was not for the reading room: the exact
// lineage the page-level event log gives (docs/formats.md).
type PageRead struct {
	Node  string
	Rank  int16
	Room  uint64
	RID   string
	TS    time.Time
	Pages int
	// Stale counts read pages per room that last wrote them; StaleOutput
	// the part of them the writer wrote after its first write (generated
	// output rather than its transferred prompt).
	Stale       map[uint64]int
	StaleOutput map[uint64]int
	// Never counts read pages nobody wrote since boot (read as zeros).
	Never int
	// Lines: the read line and the last write line of each foreign writer.
	Lines []uint64
}

// pageReplay is the result of replaying page_events.
type pageReplay struct {
	// Nodes that logged page events (exact lineage applies to them only).
	Nodes map[string]bool
	// Reads that touched foreign or never-written pages, by reading room.
	Reads map[uint64]*PageRead
}

// Pages replays the page-level events once per dataset (nil when the
// deployment did not log them).
func (d *Dataset) Pages(ctx context.Context) (*pageReplay, error) {
	if d.Cfg.ignorePages {
		return nil, nil
	}
	if d.parent != nil {
		return d.parent.Pages(ctx) // one page replay per window, not per slice
	}
	if d.pagesOK || d.pagesErr != nil {
		return d.pages, d.pagesErr
	}
	d.pages, d.pagesErr = replayPages(ctx, d)
	d.pagesOK = d.pagesErr == nil
	return d.pages, d.pagesErr
}

// replayStart is the earliest boot in force at the window start on any
// decode node: page contents survive until the node restarts, so lineage
// must be replayed from there.
func (d *Dataset) replayStart() time.Time {
	start := d.Window.From.Add(-d.Cfg.LinkMargin)
	for _, list := range d.Boots.ByNode {
		for _, b := range list {
			if b.Role != "decode" {
				continue
			}
			if !b.At.After(d.Window.From) && (b.Next == nil || b.Next.At.After(d.Window.From)) && b.At.Before(start) {
				start = b.At
			}
		}
	}
	return start
}

func replayPages(ctx context.Context, d *Dataset) (*pageReplay, error) {
	nodes, err := d.DB.PageEventNodes(ctx)
	if err != nil {
		return nil, err
	}
	pr := &pageReplay{Nodes: map[string]bool{}, Reads: map[uint64]*PageRead{}}
	for _, n := range nodes {
		pr.Nodes[n] = true
	}
	if len(pr.Nodes) == 0 {
		return nil, nil
	}
	var (
		curNode            string
		curRank            int16 = -1
		curBoot            *Boot
		writer, writerLine []uint64
		writerOut          []bool
		wrote              = map[uint64]bool{}
		prev               rowRef
	)
	// Events arrive lane by lane (node, DP rank), in time order.
	err = d.DB.ScanPageEvents(ctx, d.replayStart(), d.Window.To.Add(d.Cfg.LinkMargin), func(e *domain.PageEvent) error {
		node, rank, event, rid, room, line, pages, ts := e.Node, e.DPRank, e.Event, e.RID, e.Room, e.Line, e.Pages, e.TS
		at := rowRef{line, e.Msg}
		if at == prev {
			return nil // a re-ingested duplicate not merged yet
		}
		prev = at
		boot := d.Boots.At(node, ts)
		if node != curNode || rank != curRank || boot != curBoot {
			curNode, curRank, curBoot = node, rank, boot
			writer, writerLine, writerOut = writer[:0], writerLine[:0], writerOut[:0]
			clear(wrote)
		}
		for _, p := range pages {
			for int(p) >= len(writer) {
				writer, writerLine, writerOut = append(writer, 0), append(writerLine, 0), append(writerOut, false)
			}
		}
		switch event {
		case domain.PageWrite:
			out := wrote[room]
			wrote[room] = true
			for _, p := range pages {
				writer[p], writerLine[p], writerOut[p] = room, line, out
			}
		case domain.PageRead:
			var r *PageRead
			for _, p := range pages {
				w := writer[p]
				if w == room {
					continue
				}
				if r == nil {
					r = &PageRead{Node: node, Rank: rank, Room: room, RID: rid, TS: ts, Pages: len(pages),
						Stale: map[uint64]int{}, StaleOutput: map[uint64]int{}, Lines: []uint64{line}}
				}
				if w == 0 {
					r.Never++
					continue
				}
				if r.Stale[w] == 0 {
					r.Lines = append(r.Lines, writerLine[p])
				}
				r.Stale[w]++
				if writerOut[p] {
					r.StaleOutput[w]++
				}
			}
			if r != nil {
				pr.Reads[room] = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pr, nil
}
