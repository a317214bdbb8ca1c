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

// The end of `field`'s packed bytes at `from` (nullptr when they overrun `end`), for the field
// types whose packed length is read without decoding them: CHAR and BINARY (a length of one
// byte, or two past 255 bytes, then the bytes: StringPack::pack), VARCHAR and VARBINARY (the
// same, by the field's length bytes: Field_varstring::pack), and the integer and floating
// point types (their pack_length() bytes: Field::pack and pack_int16/32/64). `*known` is false
// for every other type, which the caller decodes instead.
const uchar *skip_packed(const Field *field, const uchar *from, const uchar *end, bool *known) {
  *known = true;
  size_t length = 0;
  switch (field->real_type()) {
    case MYSQL_TYPE_STRING:
    case MYSQL_TYPE_VARCHAR: {
      const bool two_bytes = field->field_length > 255;
      const size_t prefix = two_bytes ? 2 : 1;
      if (from + prefix > end) return nullptr;
      length = two_bytes ? uint2korr(from) : *from;
      from += prefix;
      break;
    }
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG:
    case MYSQL_TYPE_FLOAT:
    case MYSQL_TYPE_DOUBLE:
      length = field->pack_length();
      break;
    default:
      *known = false;
      return from;
  }
  if (length > static_cast<size_t>(end - from)) return nullptr;
  return from + length;
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

bool unpack_row(TABLE *table, uchar *record, const uint8_t *data, size_t length, const MY_BITMAP *wanted) {
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
    // A field the statement does not read is passed over when its length can be read: a
    // sysbench range query reads one or two of the four columns of its 100 rows.
    // Fields of any index are always decoded: the server compares them with range ends.
    if (wanted != nullptr && !bitmap_is_set(wanted, current->field_index) &&
        !(current->flags & (PRI_KEY_FLAG | PART_KEY_FLAG))) {
      bool known = false;
      const uchar *next = skip_packed(current, from, end, &known);
      if (known) {
        if (next == nullptr) return false;
        from = next;
        continue;
      }
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
