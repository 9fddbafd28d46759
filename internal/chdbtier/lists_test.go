//go:build chdb

package chdbtier

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The reads by key and room send their lists as tables beside the
// statement: on a server as the native protocol's external data, on the
// embedded engine as temporary tables of its session
// (chdbstore.QueryExternal). Both engines return the same facts, exactly
// those asked for, the newest version of each key.
func TestReadsByListsOnModernEngine(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	const n = 3_000
	var facts []*domain.Request
	var keys []string
	var rooms []uint64
	for i := 0; i < n; i++ {
		key := fmt.Sprintf(`req-'\%05d`, i) // a quote and a backslash, as in TestReadsByLongLists
		facts = append(facts, &domain.Request{Key: key, TS: t0.Add(time.Duration(i) * time.Millisecond), Tenant: "acme",
			Model: "m", Room: uint64(i + 1), GW: &domain.GatewayResponse{RequestID: key, Status: 200, Line: uint64(1_000 + i)}})
		if i%2 == 0 {
			keys = append(keys, key)
		} else if i%3 == 0 {
			rooms = append(rooms, uint64(i+1))
		}
	}
	modern, err := eng.Open("kvt_lists")
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, modern, modern.Layout())
	modernDB, err := chstore.OpenConn(modern.Conn(), eng.Version(), chstore.Options{Database: modern.Database()})
	if err != nil {
		t.Fatal(err)
	}
	type read struct{ refs, owners []domain.FactRef }
	got := map[string]read{}
	for name, db := range map[string]*chstore.Store{"18.16": testdb.New(t), "26.7": modernDB} {
		if err := db.SaveRequestFacts(ctx, facts, 1); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := db.SaveRequestFacts(ctx, facts[:10], 2); err != nil { // newer rows of ten keys
			t.Fatalf("%s: %v", name, err)
		}
		refs, err := db.RunFactRefs(ctx, 1, t0, t0.Add(time.Minute), keys, rooms)
		if err != nil {
			t.Fatalf("%s: facts by key and room: %v", name, err)
		}
		owners, err := db.RoomOwnerRefs(ctx, 1, t0, t0.Add(time.Minute), rooms)
		if err != nil {
			t.Fatalf("%s: owners by room: %v", name, err)
		}
		if len(refs) != len(keys)+len(rooms) || len(owners) != len(rooms) {
			t.Fatalf("%s: %d facts for %d keys and %d rooms, %d owners", name, len(refs), len(keys), len(rooms), len(owners))
		}
		for _, r := range refs {
			var i int
			if _, err := fmt.Sscanf(r.Key[len(`req-'\`):], "%05d", &i); err != nil || r.Room != uint64(i+1) {
				t.Fatalf("%s: ref %+v: key and room disagree", name, r)
			}
			if want := map[bool]uint64{true: 2, false: 1}[i < 10]; r.Version != want {
				t.Fatalf("%s: %s read at version %d, want the newest (%d)", name, r.Key, r.Version, want)
			}
		}
		got[name] = read{refs, owners}
	}
	if !reflect.DeepEqual(got["18.16"], got["26.7"]) {
		t.Fatal("the engines read different facts for the same lists")
	}
}
