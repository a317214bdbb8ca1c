// See key_encoding.h; the bytes are documented in docs/sql/key_encoding.md. Everything here
// runs on the thread that owns the TABLE.
#include "key_encoding.h"

#include <field.h>

namespace riptide_sql {

namespace {

// Whether `field` is encoded through its collation's weights (the string kinds).
bool is_string(const Field *field) {
  switch (field->real_type()) {
    case MYSQL_TYPE_STRING:
    case MYSQL_TYPE_VARCHAR:
    case MYSQL_TYPE_VAR_STRING:
    case MYSQL_TYPE_TINY_BLOB:
    case MYSQL_TYPE_MEDIUM_BLOB:
    case MYSQL_TYPE_LONG_BLOB:
    case MYSQL_TYPE_BLOB:
    case MYSQL_TYPE_GEOMETRY:  // A binary BLOB: an ordinary index on it is a byte prefix.
      return true;
    default:
      return false;
  }
}

// Variable-length binary strings carry their length after the weights: zero padding alone
// would make "a" and "a\0" equal, and the server tells them apart.
bool has_length_suffix(const Field *field) {
  return is_string(field) && field->charset() == &my_charset_bin && field->real_type() != MYSQL_TYPE_STRING;
}

// Bytes of the sort form of a string part of `length` bytes (the part's declared length: the
// column's for a whole-column part, the prefix's for a prefix part).
uint string_form_width(const Field *field, uint length) {
  const CHARSET_INFO *cs = field->charset();
  return static_cast<uint>(cs->strnxfrmlen(length)) + (has_length_suffix(field) ? 2 : 0);
}

uint sort_form_width(const KEY_PART_INFO *part) {
  const Field *field = part->field;
  if (is_string(field)) return string_form_width(field, part->length);
  return field->sort_length();
}

// Writes the sort form of string part `part` (the field already moved onto the record) to
// `to`, exactly string_form_width bytes.
void string_sort_form(const KEY_PART_INFO *part, uchar *to) {
  Field *field = part->field;
  const CHARSET_INFO *cs = field->charset();
  const uint width = string_form_width(field, part->length);
  const uint weights_width = width - (has_length_suffix(field) ? 2 : 0);
  String buffer;
  String *value = field->val_str(&buffer, &buffer);
  const char *bytes = value != nullptr ? value->ptr() : "";
  size_t length = value != nullptr ? value->length() : 0;
  // A part covers at most length / mbmaxlen characters (the server's rule for prefix parts).
  const uint characters = part->length / cs->mbmaxlen;
  const size_t prefix_bytes = cs->charpos(bytes, bytes + length, characters);
  if (prefix_bytes < length) length = prefix_bytes;
  cs->strnxfrm(to, weights_width, characters, reinterpret_cast<const uchar *>(bytes), length,
               MY_STRXFRM_PAD_WITH_SPACE | MY_STRXFRM_PAD_TO_MAXLEN);
  if (has_length_suffix(field)) {
    to[weights_width] = static_cast<uchar>(length >> 8);
    to[weights_width + 1] = static_cast<uchar>(length);
  }
}

}  // namespace

unsigned char index_id(const TABLE_SHARE *share, uint index) {
  return index == share->primary_key ? kPrimaryIndexId : static_cast<unsigned char>(index + 1);
}

uint key_part_width(const KEY_PART_INFO *part) {
  return (part->field->real_maybe_null() ? 1 : 0) + sort_form_width(part);
}

uint key_width(const KEY *key, uint parts) {
  uint width = 0;
  for (uint i = 0; i < parts && i < key->user_defined_key_parts; i++) width += key_part_width(&key->key_part[i]);
  return width;
}

void append_key_parts(TABLE *table, uint index, const uchar *record, uint parts, std::string *out, bool *has_null) {
  const my_ptrdiff_t offset = record - table->record[0];
  const KEY *key = &table->key_info[index];
  for (uint i = 0; i < parts && i < key->user_defined_key_parts; i++) {
    const KEY_PART_INFO *part = &key->key_part[i];
    Field *field = part->field;
    const uint width = sort_form_width(part);
    const size_t start = out->size();
    const size_t null_byte = field->real_maybe_null() ? 1 : 0;
    // Field::sort_string may write up to 8 bytes past the width it is given: leave room.
    out->resize(start + null_byte + width + 8);
    uchar *to = reinterpret_cast<uchar *>(&(*out)[start]);
    if (null_byte && field->is_real_null(offset)) {
      memset(to, 0, 1 + width);
      *has_null = true;
    } else {
      if (null_byte) *to++ = 1;
      field->move_field_offset(offset);
      if (is_string(field))
        string_sort_form(part, to);
      else
        field->sort_string(to, width);
      field->move_field_offset(-offset);
    }
    out->resize(start + null_byte + width);
    if (part->key_part_flag & HA_REVERSE_SORT) {
      for (size_t at = start; at < out->size(); at++) (*out)[at] = static_cast<char>(~(*out)[at]);
    }
  }
}

bool index_is_supported(const TABLE *table, uint index, std::string *why) {
  const KEY *key = &table->key_info[index];
  if (index + 1 >= kMetaId) {
    *why = "a table can have at most 254 indexes";
    return false;
  }
  if (key->algorithm == HA_KEY_ALG_RTREE || key->algorithm == HA_KEY_ALG_FULLTEXT || (key->flags & HA_SPATIAL) ||
      (key->flags & HA_FULLTEXT)) {
    *why = std::string("index ") + key->name.str + ": FULLTEXT and SPATIAL indexes are not supported";
    return false;
  }
  return true;
}

std::string prefix_successor(const std::string &prefix) {
  std::string successor = prefix;
  while (!successor.empty()) {
    const unsigned char last = static_cast<unsigned char>(successor.back());
    if (last != 0xFF) {
      successor.back() = static_cast<char>(last + 1);
      return successor;
    }
    successor.pop_back();
  }
  return successor;
}

uint parts_in_map(key_part_map map) {
  uint parts = 0;
  for (; map & 1; map >>= 1) parts++;
  return parts;
}

}  // namespace riptide_sql
