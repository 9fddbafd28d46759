package chdbstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kvtrail/kvtrail/domain"
)

// LibraryVersion is the chdb release kvtrail is tested with (ClickHouse
// 26.7); scripts/lib.sh fetches it into .cache/chdb/LibraryVersion/.
const LibraryVersion = "26.7.3-stable.1"

// EnvLibPath names libchdb.so, as for chdb-go.
const EnvLibPath = "CHDB_LIB_PATH"

// The library is loaded on first use, never at package init: chdb-go's
// init panics when libchdb.so is absent, which would make every kvtrail
// binary depend on a 566 MB file that only the embedded engine needs. These
// are the seven C functions kvtrail calls (chdb's chdb.h, the "new API").
var (
	libOnce sync.Once
	libErr  error
	libPath string

	chdbConnect       func(argc int, argv []*byte) *chdbConnection
	chdbCloseConn     func(conn *chdbConnection)
	chdbQuery         func(conn unsafe.Pointer, query string, format string) *chdbResult
	chdbDestroyResult func(result *chdbResult)
	chdbResultBuffer  func(result *chdbResult) *byte
	chdbResultLength  func(result *chdbResult) uint
	chdbResultError   func(result *chdbResult) string
)

// chdbConnection and chdbResult mirror chdb.h's handles: a struct holding
// one opaque pointer.
type chdbConnection struct{ internal unsafe.Pointer }
type chdbResult struct{ _ unsafe.Pointer }

// FindLibrary returns the libchdb.so to load: explicit when set, else
// $CHDB_LIB_PATH, else .cache/chdb/LibraryVersion/libchdb.so in the working
// directory or one of its parents (where scripts/lib.sh puts it in a
// checkout). The error, of kind Unavailable, says how to get the library.
func FindLibrary(explicit string) (string, error) {
	try := []string{}
	switch {
	case explicit != "":
		try = append(try, explicit)
	case os.Getenv(EnvLibPath) != "":
		try = append(try, os.Getenv(EnvLibPath))
	default:
		if wd, err := os.Getwd(); err == nil {
			for d := wd; ; d = filepath.Dir(d) {
				try = append(try, filepath.Join(d, ".cache", "chdb", LibraryVersion, "libchdb.so"))
				if filepath.Dir(d) == d {
					break
				}
			}
		}
	}
	for _, p := range try {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return filepath.Abs(p)
		}
	}
	where := "$" + EnvLibPath + " and .cache/chdb/" + LibraryVersion + "/libchdb.so"
	if len(try) == 1 {
		where = try[0]
	}
	return "", domain.E(domain.Unavailable, fmt.Errorf(
		"embedded engine: libchdb.so not found (looked at %s); fetch it with `./scripts/demo.sh --engine embedded` "+
			"or `npm pack @chdb/lib-linux-x64-gnu@%s` (take package/libchdb.so) and name it with local.chdb_library or $%s",
		where, LibraryVersion, EnvLibPath))
}

// LoadLibrary loads libchdb.so from path once per process. A second call
// with another path fails: the library cannot be unloaded.
func LoadLibrary(path string) error {
	libOnce.Do(func() {
		libPath = path
		libErr = loadLibrary(path)
	})
	if libErr != nil {
		return libErr
	}
	if path != libPath {
		return fmt.Errorf("embedded engine: %s already loaded, not %s", libPath, path)
	}
	return nil
}

func loadLibrary(path string) error {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("embedded engine: load %s: %w", path, err)
	}
	for _, f := range []struct {
		ptr  any
		name string
	}{
		{&chdbConnect, "chdb_connect"},
		{&chdbCloseConn, "chdb_close_conn"},
		{&chdbQuery, "chdb_query"},
		{&chdbDestroyResult, "chdb_destroy_query_result"},
		{&chdbResultBuffer, "chdb_result_buffer"},
		{&chdbResultLength, "chdb_result_length"},
		{&chdbResultError, "chdb_result_error"},
	} {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil {
			return fmt.Errorf("embedded engine: %s lacks %s (want chdb %s): %w", path, f.name, LibraryVersion, err)
		}
		purego.RegisterFunc(f.ptr, sym)
	}
	return nil
}

// session is one chdb connection: a persistent store under a directory.
type session struct{ conn *chdbConnection }

func newSession(path string) (*session, error) {
	if chdbConnect == nil {
		return nil, errors.New("embedded engine: libchdb.so is not loaded")
	}
	args := []string{"clickhouse", "--path=" + path}
	argv := make([]*byte, len(args))
	for i, a := range args {
		b := append([]byte(a), 0)
		argv[i] = &b[0]
	}
	conn := chdbConnect(len(argv), argv)
	if conn == nil || conn.internal == nil {
		return nil, fmt.Errorf("embedded engine: chdb_connect on %s failed (is it held by another process?)", path)
	}
	return &session{conn: conn}, nil
}

func (s *session) Close() {
	if s.conn != nil {
		chdbCloseConn(s.conn)
		s.conn = nil
	}
}

// query runs one statement and returns a copy of its result (the buffer is
// chdb's and is freed here).
func (s *session) query(sql, format string) ([]byte, error) {
	if s.conn == nil {
		return nil, errors.New("embedded engine: session closed")
	}
	res := chdbQuery(s.conn.internal, sql, format)
	if res == nil {
		return nil, nil
	}
	defer chdbDestroyResult(res)
	if msg := chdbResultError(res); msg != "" {
		return nil, errors.New(msg)
	}
	n := chdbResultLength(res)
	buf := chdbResultBuffer(res)
	if n == 0 || buf == nil {
		return nil, nil
	}
	return append([]byte(nil), unsafe.Slice(buf, n)...), nil
}
