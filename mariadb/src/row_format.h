// The row format, version 1 (docs/sql/row_format.md): a version byte, the null bitmap of the
// table's nullable fields, then each non-null field in the server's packed form
// (Field::pack), in field order. It holds what the server's record buffer holds, in a compact,
// pointer-free form (BLOBs inline).
//
// Concurrency contract: plain functions over the caller's buffers.
#ifndef RIPTIDE_MARIADB_ROW_FORMAT_H
#define RIPTIDE_MARIADB_ROW_FORMAT_H

#include <my_global.h>
#include <table.h>

#include <cstdint>
#include <string>

namespace riptide_sql {

// First byte of every row: the format version.
constexpr uint8_t kRowFormatVersion = 1;

// Encodes the row in `record` (a record buffer of `table`) into `out`.
void pack_row(TABLE *table, const uchar *record, std::string *out);

// Decodes `data` into `record`. Returns false when the bytes are not a row of this table.
// With `wanted`, a bitmap over the table's fields, the fields outside it may be skipped
// instead of decoded (their bytes in `record` are then left as they were; null bits are set
// for every field), as far as their packed length can be read without decoding them; fields
// of an index are always decoded.
bool unpack_row(TABLE *table, uchar *record, const uint8_t *data, size_t length, const MY_BITMAP *wanted = nullptr);

}  // namespace riptide_sql

#endif
