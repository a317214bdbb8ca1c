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
#include <vector>

namespace riptide_sql {

// First byte of every row: the format version.
constexpr uint8_t kRowFormatVersion = 1;

// Encodes the row in `record` (a record buffer of `table`) into `out`.
void pack_row(TABLE *table, const uchar *record, std::string *out);

// What decoding a row needs to know of each stored field of a table, found once per TABLE
// (kept by its handler) instead of asked of every field of every row through virtual calls.
struct RowPlan {
  struct Step {
    Field *field = nullptr;
    uint field_index = 0;
    bool nullable = false;
    // Part of an index: always decoded (the server compares it with range ends).
    bool indexed = false;
    // How the field's packed length reads without decoding it: the integer and floating
    // point types are their pack_length() bytes (kFixed, fixed_bytes: Field::pack and
    // pack_int16/32/64); CHAR/BINARY and VARCHAR/VARBINARY a length of one byte, or two past
    // 255 bytes of field length, then the bytes (StringPack::pack, Field_varstring::pack);
    // other types only by decoding them (kUnknown).
    enum Skip : uint8_t { kUnknown, kFixed, kOneByteLength, kTwoByteLength } skip = kUnknown;
    uint32_t fixed_bytes = 0;
  };
  // The TABLE the plan was made for (a handler's, whose fields it points to).
  const TABLE *table = nullptr;
  size_t bitmap_bytes = 0;
  std::vector<Step> steps;
};

// Makes `plan` describe `table`.
void build_row_plan(TABLE *table, RowPlan *plan);

// unpack_row with the plan of `table` (built by build_row_plan for this TABLE).
bool unpack_row(const RowPlan &plan, TABLE *table, uchar *record, const uint8_t *data, size_t length,
                const MY_BITMAP *wanted);

// Decodes `data` into `record`. Returns false when the bytes are not a row of this table.
// With `wanted`, a bitmap over the table's fields, the fields outside it may be skipped
// instead of decoded (their bytes in `record` are then left as they were; null bits are set
// for every field), as far as their packed length can be read without decoding them; fields
// of an index are always decoded.
bool unpack_row(TABLE *table, uchar *record, const uint8_t *data, size_t length, const MY_BITMAP *wanted = nullptr);

}  // namespace riptide_sql

#endif
