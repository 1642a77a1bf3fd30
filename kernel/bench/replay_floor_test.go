package bench

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"

	"github.com/kairo-os/kairo/internal/sqlitecache"
)

// openReplayFloor opens the replay store read-only, with the page cache
// and no memory map, as the store's readers are.
func openReplayFloor(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)"+sqlitecache.Pragmas())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// replayFloor reads every pack of the store through the same driver and
// walks its envelopes' lengths without decoding them: SQLite's page reads
// and the driver's copy of each pack, what any reader of this format pays
// before it knows an event. It returns the events the packs hold.
func replayFloor(ctx context.Context, db *sql.DB) (int, error) {
	rows, err := db.QueryContext(ctx, `SELECT envs FROM packs ORDER BY first_seq`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var envs sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&envs); err != nil {
			return n, err
		}
		for off := 0; off < len(envs); n++ {
			size, k := binary.Uvarint(envs[off:])
			if k <= 0 || size > uint64(len(envs)-off-k) {
				return n, fmt.Errorf("a pack is cut short at byte %d", off)
			}
			off += k + int(size)
		}
	}
	return n, rows.Err()
}
