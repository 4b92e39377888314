package nvrtc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CacheDirEnv names the environment variable that overrides the cache's
// directory ("off" disables the default cache).
const CacheDirEnv = "NCCL4GO_KERNEL_CACHE"

// Cache keeps compiled code on disk. Safe for concurrent use, by
// goroutines and by processes sharing the directory: entries are written
// to a temporary file in the directory and renamed into place (atomic on
// one file system), so a reader sees a whole entry or none.
type Cache struct {
	// Dir holds the entries, one file each, named by their key.
	Dir string
}

// DefaultCache is the cache under $XDG_CACHE_HOME/nccl4go/kernels (Go's
// os.UserCacheDir: $XDG_CACHE_HOME, else ~/.cache), or the directory
// [CacheDirEnv] names. It returns nil (no cache) when CacheDirEnv is "off"
// or no cache directory can be made.
func DefaultCache() *Cache {
	dir := os.Getenv(CacheDirEnv)
	if dir == "off" {
		return nil
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil
		}
		dir = filepath.Join(base, "nccl4go", "kernels")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil
	}
	return &Cache{Dir: dir}
}

var errNoDir = &OptionError{Option: "Cache.Dir", Reason: "empty: use DefaultCache, or set Dir to the cache's directory"}

// Compile returns the code Compile(src, opts) returns, from the cache when
// an entry has the same key: the source, the program name, every option
// NVRTC gets (the architecture resolved from the device included), the
// output kind, NVRTC's version and the extra key strings keys. The
// headers that #include reads are not hashed: pass what identifies them
// (a library's version, their directory) in keys. A nil [Cache] compiles
// every time.
func (c *Cache) Compile(src string, opts Options, keys ...string) (r *Result, cached bool, err error) {
	args, arch, err := opts.args()
	if err != nil {
		return nil, false, err
	}
	if c != nil && c.Dir == "" {
		return nil, false, errNoDir
	}
	if err := checkNUL("source", src); err != nil {
		return nil, false, err
	}
	if c == nil {
		r, err := compileArgs(src, opts.name(), args, arch, opts.Output)
		return r, false, err
	}
	major, minor, err := Version()
	if err != nil {
		return nil, false, err
	}
	parts := append([]string{fmt.Sprintf("nvrtc %d.%d", major, minor), opts.name(), src, opts.Output.String()}, args...)
	parts = append(append(parts, "keys"), keys...)
	ext := map[Output]string{CUBIN: ".cubin", PTX: ".ptx", LTOIR: ".ltoir"}[opts.Output]
	var compiled *Result
	code, cached, err := c.Get(ext, func() ([]byte, error) {
		var err error
		compiled, err = compileArgs(src, opts.name(), args, arch, opts.Output)
		if err != nil {
			return nil, err
		}
		return compiled.Code, nil
	}, parts...)
	if err != nil {
		return nil, false, err
	}
	if compiled != nil {
		return compiled, false, nil
	}
	return &Result{Code: code, Output: opts.Output, Arch: arch}, cached, nil
}

// Get returns the entry whose key is keys (every string that determines
// the code: source, options, compiler and library versions), making it
// with build when the cache has none (ext is the file's extension, such as
// ".cubin"). cached reports whether it came from the cache. An entry that
// cannot be written (a read-only directory, a full disk) costs the next run
// a build, nothing more. A nil [Cache] calls build every time; a Cache with
// an empty Dir, a nil build or an ext holding a path separator is an
// *[OptionError].
func (c *Cache) Get(ext string, build func() ([]byte, error), keys ...string) (code []byte, cached bool, err error) {
	if build == nil {
		return nil, false, &OptionError{Option: "Cache.Get build", Reason: "nil"}
	}
	if c != nil && c.Dir == "" {
		return nil, false, errNoDir
	}
	if strings.ContainsAny(ext, `/\`+"\x00") {
		return nil, false, &OptionError{Option: "Cache.Get ext", Reason: fmt.Sprintf("%q holds a path separator", ext)}
	}
	if c == nil {
		code, err = build()
		return code, false, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "nccl4go kernel cache 1\n")
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s\n", len(k), k)
	}
	path := filepath.Join(c.Dir, hex.EncodeToString(h.Sum(nil))[:32]+ext)
	if code, err := os.ReadFile(path); err == nil && len(code) > 0 {
		return code, true, nil
	}
	code, err = build()
	if err != nil {
		return nil, false, err
	}
	_ = c.store(path, code)
	return code, false, nil
}

// store writes code to path atomically: a temporary file in the same
// directory, synced, then renamed over path.
func (c *Cache) store(path string, code []byte) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(code); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
