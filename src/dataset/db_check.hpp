// What the dataset reader relies on in metadata.db, checked when it is
// opened (readers, append, repair), so that a damaged file fails naming
// itself instead of answering a filter quietly wrong.
//
// SQLite itself refuses a file whose header counts more whole pages than the
// file holds, but not one cut inside its last page: that page reads back
// zero-padded, and a cell at its end (typically an index entry's rowid, or a
// row's last column) silently changes. `PRAGMA quick_check` does not notice
// either (it does not compare indexes with their table). So:
//   - the file size must be a whole number of pages and, outside WAL mode,
//     at least the page count SQLite works with (the header's count);
//   - every plain index on `runs` must hold exactly the (rowid, key) pairs of
//     the table: one sequential pass over the table and one over each index,
//     compared through an order-independent digest. A filter that uses an
//     index (`engine = ?`, `max_score BETWEEN ...`) then reads what the
//     table holds.
// Both are linear scans (about as much as the open's own COUNT/SUM pass per
// index); verify --full's integrity_check (a B-tree lookup per row and index)
// remains the detailed diagnosis.
#pragma once

#include "dataset/metadata.hpp"

namespace a2pack::dataset {

// After the first read of `db` (which rolls back a hot journal): the file
// holds every page its header counts. CORRUPT naming the file otherwise.
void check_db_size(Db& db);

// Every index on main.<table> (but partial and expression indexes, which
// cannot be compared this way) holds the table's (rowid, columns) pairs.
// CORRUPT naming the file and the index otherwise. `runs` by default; the
// writers and verify also check `run_digests` (dataset/digest.hpp), which
// readers never query.
void check_db_indexes(Db& db, const char* table = "runs");

}  // namespace a2pack::dataset
