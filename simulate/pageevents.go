package simulate

import "strconv"

// pageEvent writes one page-level event (docs/formats.md) if the node has
// engine debug tracing enabled. writerRoom != 0 marks a write whose data
// belongs to another room.
func (n *node) pageEvent(t int64, rank int, event, rid string, room uint64, pages []int32) {
	if n.pe == nil || len(pages) == 0 {
		return
	}
	lw := n.pe
	b := append(lw.buf[:0], `{"ts":"`...)
	b = lw.appendRFC3339(b, t)
	b = append(b, `","node":"`...)
	b = append(b, n.name...)
	b = append(b, `","dp_rank":`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	b = append(b, `,"event":"`...)
	b = append(b, event...)
	b = append(b, `","rid":"`...)
	b = append(b, rid...)
	b = append(b, `","bootstrap_room":`...)
	b = strconv.AppendUint(b, room, 10)
	b = append(b, `,"pages":[`...)
	for i, p := range pages {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	b = append(b, "]}"...)
	lw.buf = b
	lw.writeLine(b)
}
