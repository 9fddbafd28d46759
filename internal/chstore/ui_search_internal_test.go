package chstore

import (
	"testing"

	"github.com/kvtrail/kvtrail/domain"
)

// Every sort the UI offers (domain.SearchSorts, which the handlers
// validate against) has an order here, and there is no order the UI cannot
// ask for.
func TestSearchSortsMatchTheDomain(t *testing.T) {
	if len(uiSearchSorts) != len(domain.SearchSorts) {
		t.Fatalf("%d orders for %d sorts", len(uiSearchSorts), len(domain.SearchSorts))
	}
	for _, s := range domain.SearchSorts {
		if _, ok := uiSearchSorts[s]; !ok {
			t.Errorf("sort %q has no order", s)
		}
	}
}
