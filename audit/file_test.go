package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func lineLen(t *testing.T) int {
	t.Helper()
	b, err := encode(rec("s", 100))
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestRotation(t *testing.T) {
	tests := []struct {
		name        string
		perFile     int // records that fit in max_bytes
		backups     int
		writes      int64
		wantBackups int
		wantFirst   int64 // oldest sequence kept
	}{
		{"keep two", 3, 2, 10, 2, 3},
		{"keep all", 3, 0, 10, 3, 0},
		{"no rotation needed", 20, 2, 10, 0, 0},
		{"one per file", 1, 3, 6, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, sync := range []bool{false, true} {
				path := filepath.Join(t.TempDir(), "records.jsonl")
				opts := []Option{WithRotation(int64(tt.perFile*lineLen(t)), tt.backups)}
				if sync {
					opts = append(opts, WithSyncWrite())
				}
				s, err := OpenFile(path, opts...)
				if err != nil {
					t.Fatal(err)
				}
				for i := int64(100); i < 100+tt.writes; i++ { // 3-digit sequences: equal line lengths
					s.Write(rec("s", i))
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				bs, err := Backups(path)
				if err != nil {
					t.Fatal(err)
				}
				if len(bs) != tt.wantBackups {
					t.Fatalf("sync=%v: backups = %v, want %d", sync, bs, tt.wantBackups)
				}
				for _, b := range bs {
					if !regexp.MustCompile(`records\.\d{6}\.jsonl$`).MatchString(b) {
						t.Errorf("backup name %s", b)
					}
					st, _ := os.Stat(b)
					if st.Size() > int64(tt.perFile*lineLen(t)) {
						t.Errorf("backup %s has %d bytes, over the bound", b, st.Size())
					}
					if st.Mode().Perm() != 0o600 {
						t.Errorf("backup %s mode %v", b, st.Mode().Perm())
					}
				}
				if got := readAll(t, path); !equalSeqs(got, seqRange(100+tt.wantFirst, 100+tt.writes)) {
					t.Fatalf("sync=%v: sequences %v", sync, got)
				}
			}
		})
	}
}

func TestRotationContinuesNumberingAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	for round := 0; round < 2; round++ {
		s, err := OpenFile(path, WithRotation(int64(lineLen(t)), 0))
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 3; i++ {
			s.Write(rec("s", 100+int64(round)*3+i))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	bs, _ := Backups(path)
	if len(bs) != 5 || filepath.Base(bs[4]) != "records.000005.jsonl" {
		t.Fatalf("backups = %v", bs)
	}
	if got := readAll(t, path); !equalSeqs(got, seqRange(100, 106)) {
		t.Fatalf("sequences %v", got)
	}
}

func TestReopenAppendsAndKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	for round := int64(0); round < 3; round++ {
		s, err := OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s.Write(rec("s", round))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, path); !equalSeqs(got, seqRange(0, 3)) {
		t.Fatalf("sequences %v", got)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("an existing file's mode changed to %v", st.Mode().Perm())
	}
}

func TestTornTailTruncatedOnOpen(t *testing.T) {
	good, _ := encode(rec("s", 1))
	tests := []struct {
		name     string
		content  []byte
		wantKeep int
	}{
		{"empty", nil, 0},
		{"intact", good, len(good)},
		{"torn after one", append(append([]byte{}, good...), `{"interception_point":"inp`...), len(good)},
		{"only torn", []byte(`{"interception_point"`), 0},
		{"zeros after a crash", append(append([]byte{}, good...), make([]byte, 300)...), len(good)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 64 << 10} {
				path := filepath.Join(t.TempDir(), "r.jsonl")
				if err := os.WriteFile(path, tt.content, 0o600); err != nil {
					t.Fatal(err)
				}
				s, err := OpenFile(path, withTailChunk(chunk))
				if err != nil {
					t.Fatal(err)
				}
				if got := s.Stats().Torn; got != int64(len(tt.content)-tt.wantKeep) {
					t.Errorf("chunk %d: torn = %d, want %d", chunk, got, len(tt.content)-tt.wantKeep)
				}
				s.Write(rec("s", 2))
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(path)
				want := append(append([]byte{}, tt.content[:tt.wantKeep]...), mustEncode(t, rec("s", 2))...)
				if !bytes.Equal(b, want) {
					t.Fatalf("chunk %d: file =\n%q\nwant\n%q", chunk, b, want)
				}
			}
		})
	}
}

func mustEncode(t testing.TB, r *points.Record) []byte {
	t.Helper()
	b, err := encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
