package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// OpenFile opens (creating it and its directories) the JSONL file at path
// for appending and returns a sink that writes records to it, named "file"
// unless [WithName] says otherwise. A torn last line left by a crash is
// truncated first (see the package doc); Stats().Torn says how many bytes.
// A new file gets mode 0600 and new directories 0700; an existing file
// keeps its mode.
func OpenFile(path string, opts ...Option) (*Sink, error) {
	o := buildOptions("file", opts)
	fb, torn, err := openFileBackend(path, o)
	if err != nil {
		if o.reporter != nil {
			o.reporter.SinkError(o.name, OpOpen)
		}
		return nil, err
	}
	if torn > 0 {
		o.logger.Warn("audit record file had a torn last line; truncated it", "sink", o.name, "path", path, "bytes", torn)
	}
	fb.log = o.logger.With("sink", o.name, "path", path)
	fb.now, fb.checkEvery = o.now, o.reopenCheck
	if fb.stream && fb.syncable && o.maxBytes > 0 {
		o.logger.Warn("audit record file names a descriptor (such as /dev/stdout): it is not rotated", "sink", o.name, "path", path)
	} else if fb.stream && !fb.syncable && (o.maxBytes > 0 || o.syncWrite) {
		o.logger.Warn("audit record file is not a regular file (a pipe, terminal or device such as /dev/stdout): it is not rotated and not fsynced", "sink", o.name, "path", path)
	}
	s := newSink(o, fb, func(h hooks) { fb.h = h })
	s.torn = torn
	return s, nil
}

// fileBackend appends to one file and rotates it by size.
type fileBackend struct {
	path       string
	f          *os.File
	size       int64 // bytes in f, excluding buf
	buf        []byte
	dirty      bool // written since the last fsync
	unaligned  bool // a failed write left a partial line we could not cut
	maxBytes   int64
	maxBackups int
	next       int // the next backup number
	h          hooks
	// stream: the path is no regular file (a pipe, terminal or device,
	// /dev/stdout in a container) or names a descriptor (/dev/stdout when
	// stdout is a file), so there is no tail to recover, nothing to rotate
	// (renaming /dev/stdout would move the device's name) and nothing
	// fsync can make more durable.
	stream bool
	// syncable: a stream whose descriptor is open on a regular file,
	// which fsync does make durable.
	syncable bool
	// The path is looked at every checkEvery (0: every flush): when the
	// file was moved or removed under it (logrotate without copytruncate,
	// an operator's mv or rm), the path is opened again, so that records
	// do not go on into a renamed file or an unlinked one.
	now        func() time.Time
	checkEvery time.Duration
	checked    time.Time
	log        *slog.Logger
	// lost: the open file was removed (it has no name left) and its path
	// could not be opened again. What is written to it no reader will
	// ever see, so records are dropped, counted, instead of written until
	// a reopen succeeds; a file that was only renamed is still written,
	// as its lines can be read under the new name.
	lost bool
}

// errFileLost is flush's answer while the file is lost.
var errFileLost = fmt.Errorf("audit: record file was removed and its path cannot be opened again: %w", ErrDropped)

// descriptorPath reports whether path names a process's descriptor rather
// than a file of its own: /dev/stdout, /dev/stderr, /dev/fd/N,
// /proc/self/fd/N (or another process's). Such a path is never rotated or
// cut, whatever the descriptor is open on (a regular file when the process
// runs as "serve > out.log"): renaming it would move the name, not the
// output.
func descriptorPath(path string) bool {
	c := filepath.Clean(path)
	switch c {
	case "/dev/stdout", "/dev/stderr":
		return true
	}
	if strings.HasPrefix(c, "/dev/fd/") {
		return true
	}
	rest, ok := strings.CutPrefix(c, "/proc/")
	if !ok {
		return false
	}
	_, fd, ok := strings.Cut(rest, "/")
	return ok && strings.HasPrefix(fd, "fd/")
}

func openFileBackend(path string, o options) (*fileBackend, int64, error) {
	if path == "" {
		return nil, 0, errors.New("audit: empty record file path")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("audit: record directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if st, serr := os.Stat(path); err != nil && errors.Is(err, fs.ErrPermission) && serr == nil && !st.Mode().IsRegular() {
		// A pipe or device may be open for writing only; the first
		// error stays the one reported when this fails too.
		if wf, werr := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); werr == nil {
			f, err = wf, nil
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("audit: open record file: %w", err)
	}
	st, serr := f.Stat()
	regular := serr == nil && st.Mode().IsRegular()
	if !regular || descriptorPath(path) {
		// A descriptor open on a regular file ("serve > out.log") is
		// still fsynced: only its name is not ours to rotate or cut.
		return &fileBackend{path: path, f: f, stream: true, syncable: regular}, 0, nil
	}
	keep, torn, err := recoverTail(f, o.tailChunk)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("audit: recover record file %s: %w", path, err)
	}
	// Make the file's directory entry durable, as a fresh file's may not be.
	_ = syncDir(dir)
	b := &fileBackend{path: path, f: f, size: keep, maxBytes: o.maxBytes, maxBackups: o.maxBackups}
	backups, err := b.backups()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("audit: list record backups: %w", err)
	}
	b.next = 1
	if len(backups) > 0 {
		b.next = backups[len(backups)-1].n + 1
	}
	return b, torn, nil
}

// recoverTail truncates f after its last newline, reading backwards in
// chunks so that a large file costs one read when it is intact. It returns
// the kept size and the number of bytes removed.
func recoverTail(f *os.File, chunk int) (keep, torn int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := st.Size()
	keep, err = completeLines(f, size, chunk)
	if err != nil {
		return 0, 0, err
	}
	if keep == size {
		return size, 0, nil
	}
	if err := f.Truncate(keep); err != nil {
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, 0, err
	}
	return keep, size - keep, nil
}

// completeLines returns the length of the prefix of r[0:size] that ends
// with its last newline (0 when there is none).
func completeLines(r io.ReaderAt, size int64, chunk int) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	buf := make([]byte, min(int64(chunk), size))
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		p := buf[:end-start]
		if _, err := r.ReadAt(p, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

func (b *fileBackend) add(line []byte) {
	if b.maxBytes > 0 && !b.lost { // a lost file grows no more: nothing to rotate
		cur := b.size + int64(len(b.buf))
		if cur > 0 && cur+int64(len(line)) > b.maxBytes {
			// A failed rotation is reported and writing goes on in the
			// current file: an oversized file beats a lost record.
			_ = b.rotate()
		}
	}
	b.buf = append(b.buf, line...)
}

func (b *fileBackend) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	b.followPath()
	if b.lost {
		lines := bytes.Count(b.buf, []byte{'\n'})
		b.buf = b.buf[:0]
		b.h.drop(lines, "record file removed and its path cannot be opened again")
		return errFileLost
	}
	if b.unaligned {
		// Put the partial line a failed write left behind on its own.
		b.buf = append([]byte{'\n'}, b.buf...)
	}
	lines := bytes.Count(b.buf, []byte{'\n'})
	if b.unaligned {
		lines--
	}
	n, err := b.f.Write(b.buf)
	b.buf = b.buf[:0]
	if err != nil {
		// Cut whatever part made it, so the file stays line-aligned. A
		// stream's size is not the file's (a descriptor's file holds what
		// was there before, and what others write to it): never cut it.
		if n > 0 {
			if b.stream {
				b.unaligned = true
			} else if terr := b.f.Truncate(b.size); terr != nil {
				b.size += int64(n)
				b.unaligned = true
			}
		}
		b.h.fail(OpWrite, lines, err)
		return err
	}
	b.size += int64(n)
	b.unaligned = false
	b.dirty = true
	b.h.wrote(lines)
	return nil
}

func (b *fileBackend) sync() error {
	if !b.dirty || b.stream && !b.syncable {
		b.dirty = false
		return nil
	}
	if err := b.f.Sync(); err != nil {
		b.h.fail(OpSync, 0, err)
		return err
	}
	b.dirty = false
	return nil
}

func (b *fileBackend) close() error {
	return b.f.Close()
}

// followPath reopens the path when the open file is no longer the one it
// names (moved, removed or replaced), at most once per checkEvery. What is
// still buffered goes to the new file; what was written before stays in
// the old one, complete. When the path cannot be opened, a renamed file
// goes on being written, and a removed one is lost (b.lost) until the
// path opens again.
func (b *fileBackend) followPath() {
	if b.stream || b.now == nil {
		return
	}
	now := b.now()
	if b.checkEvery > 0 && now.Sub(b.checked) < b.checkEvery {
		return
	}
	b.checked = now
	cur, err := b.f.Stat()
	if err != nil {
		return
	}
	gone := unlinked(cur)
	if st, err := os.Stat(b.path); err == nil && os.SameFile(st, cur) {
		b.lost = false
		return
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) && !gone {
		return // unreadable for now, and ours still has a name: keep it
	}
	nf, err := openAgain(b.path)
	if err != nil {
		b.h.fail(OpOpen, 0, err)
		if gone && !b.lost && b.log != nil {
			b.log.Error("audit record file was removed and its path cannot be opened again: records are dropped until it can", "error", err.Error())
		}
		// A renamed file still holds what we append (late beats lost);
		// a removed one does not.
		b.lost = gone
		return
	}
	wasLost := b.lost
	b.lost = false
	size := int64(0)
	if st, err := nf.Stat(); err == nil {
		size = st.Size()
	}
	if err := b.f.Sync(); err != nil && b.dirty {
		b.h.fail(OpSync, 0, err)
	}
	if err := b.f.Close(); err != nil {
		b.h.fail(OpClose, 0, err)
	}
	b.f, b.size, b.dirty = nf, size, false
	// A file someone else started may end mid-line: ours start on a new one.
	b.unaligned = size > 0 && !endsWithNewline(nf, size)
	_ = syncDir(filepath.Dir(b.path))
	if b.log != nil {
		b.log.Warn("audit record file was moved, removed or replaced; opened its path again", "size", size, "was_lost", wasLost)
	}
}

// openAgain opens path for appending, creating it and its directories.
func openAgain(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: record directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: reopen record file: %w", err)
	}
	return f, nil
}

func endsWithNewline(f *os.File, size int64) bool {
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return true // unknown: do not add a line of our own
	}
	return last[0] == '\n'
}

// rotate moves the current file to the next backup name and starts a new
// one. The old file is fsynced first, so a backup is always complete.
func (b *fileBackend) rotate() error {
	if err := b.flush(); err != nil {
		return err
	}
	if err := b.sync(); err != nil {
		return err
	}
	name := b.backupName(b.next)
	if err := os.Rename(b.path, name); err != nil {
		b.h.fail(OpRotate, 0, err)
		return err
	}
	b.next++
	nf, err := os.OpenFile(b.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		// Keep appending to the renamed file: nothing is lost, and the
		// next rotation tries again.
		b.h.fail(OpRotate, 0, err)
		return err
	}
	old := b.f
	b.f, b.size, b.dirty = nf, 0, false
	if err := old.Close(); err != nil {
		b.h.fail(OpClose, 0, err)
	}
	_ = syncDir(filepath.Dir(b.path))
	if err := b.prune(); err != nil {
		b.h.fail(OpRotate, 0, err)
		return err
	}
	return nil
}

type backup struct {
	name string
	n    int
}

// backupName is stem.NNNNNN.ext: records.jsonl → records.000001.jsonl.
func (b *fileBackend) backupName(n int) string {
	ext := filepath.Ext(b.path)
	return fmt.Sprintf("%s.%06d%s", strings.TrimSuffix(b.path, ext), n, ext)
}

// backups lists the rotated files, oldest first.
func (b *fileBackend) backups() ([]backup, error) {
	return listBackups(b.path)
}

// listBackups lists the rotated files of path, oldest first.
func listBackups(path string) ([]backup, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []backup
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) || len(name) <= len(prefix)+len(ext) {
			continue
		}
		digits := name[len(prefix) : len(name)-len(ext)]
		if strings.Trim(digits, "0123456789") != "" {
			continue
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n <= 0 {
			continue
		}
		out = append(out, backup{name: filepath.Join(dir, name), n: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out, nil
}

// Backups returns the rotated files of the record file at path, oldest
// first, for readers that want the whole history.
func Backups(path string) ([]string, error) {
	bs, err := listBackups(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.name
	}
	return out, nil
}

func (b *fileBackend) prune() error {
	if b.maxBackups <= 0 {
		return nil
	}
	bs, err := b.backups()
	if err != nil {
		return err
	}
	var errs []error
	for len(bs) > b.maxBackups {
		if err := os.Remove(bs[0].name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		bs = bs[1:]
	}
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
