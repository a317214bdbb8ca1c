// See row_format.h. The bytes are documented in docs/sql/row_format.md. Runs on the thread
// that owns the TABLE.
#include "row_format.h"

#include <field.h>

namespace riptide_sql {

namespace {

// The stored fields of `table` that may be NULL, in field order: they own the bits of the
// bitmap. Virtual (not stored) generated columns are computed by the server after each read.
size_t null_bitmap_bytes(TABLE *table) {
  size_t nullable = 0;
  for (Field **field = table->field; *field; field++) {
    if ((*field)->stored_in_db() && (*field)->real_maybe_null()) nullable++;
  }
  return (nullable + 7) / 8;
}

}  // namespace

void pack_row(TABLE *table, const uchar *record, std::string *out) {
  const my_ptrdiff_t offset = record - table->record[0];
  const size_t bitmap_bytes = null_bitmap_bytes(table);
  // The largest the packed fields can be: each field's in-record length, plus a BLOB's data.
  size_t capacity = 1 + bitmap_bytes;
  for (Field **field = table->field; *field; field++) {
    capacity += (*field)->pack_length() + 2;
    if ((*field)->flags & BLOB_FLAG) {
      Field_blob *blob = static_cast<Field_blob *>(*field);
      capacity += blob->get_length(blob->ptr + offset);
    }
  }
  out->resize(capacity);
  uchar *start = reinterpret_cast<uchar *>(&(*out)[0]);
  start[0] = kRowFormatVersion;
  uchar *bitmap = start + 1;
  memset(bitmap, 0, bitmap_bytes);
  uchar *to = bitmap + bitmap_bytes;
  size_t null_index = 0;
  for (Field **field = table->field; *field; field++) {
    Field *current = *field;
    if (!current->stored_in_db()) continue;
    if (current->real_maybe_null()) {
      const bool is_null = current->is_real_null(offset);
      if (is_null) bitmap[null_index / 8] |= static_cast<uchar>(1u << (null_index % 8));
      null_index++;
      if (is_null) continue;
    }
    current->move_field_offset(offset);
    to = current->pack(to, current->ptr);
    current->move_field_offset(-offset);
  }
  out->resize(static_cast<size_t>(to - start));
}

bool unpack_row(TABLE *table, uchar *record, const uint8_t *data, size_t length) {
  const my_ptrdiff_t offset = record - table->record[0];
  const size_t bitmap_bytes = null_bitmap_bytes(table);
  if (length < 1 + bitmap_bytes || data[0] != kRowFormatVersion) return false;
  const uchar *bitmap = data + 1;
  const uchar *from = bitmap + bitmap_bytes;
  const uchar *end = data + length;
  // Bits the server keeps in the null bytes besides the fields' null bits start as in the
  // table's default row.
  memcpy(record, table->s->default_values, table->s->null_bytes);
  size_t null_index = 0;
  for (Field **field = table->field; *field; field++) {
    Field *current = *field;
    if (!current->stored_in_db()) continue;
    if (current->real_maybe_null()) {
      const bool is_null = bitmap[null_index / 8] & (1u << (null_index % 8));
      null_index++;
      if (is_null) {
        current->set_null(offset);
        continue;
      }
      current->set_notnull(offset);
    }
    // BLOB fields point into `data` afterwards: the caller keeps it while the row is used.
    // Field_blob::unpack stores through the field's own pointer whatever `to` it is given, so
    // the field is moved onto `record` for the call.
    current->move_field_offset(offset);
    from = current->unpack(current->ptr, from, end, 0);
    current->move_field_offset(-offset);
    if (from == nullptr || from > end) return false;
  }
  return from == end;
}

}  // namespace riptide_sql
