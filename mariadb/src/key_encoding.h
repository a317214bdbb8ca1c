// Memcomparable keys, key format version 1 (docs/sql/key_encoding.md): the bytes of an index
// entry's key compare, byte by byte, as the server compares the index's values, so Riptide's
// bytewise order is the index order and every prefix or range of an index is a key range.
//
// An entry key is the index id (one byte, see index_id) followed by each key part's image:
// for a nullable part a null byte (0x00 NULL, 0x01 not NULL), then the part's sort form, which
// has a fixed width per part (so a prefix of parts is a prefix of bytes). A NULL part's sort
// form is all zero bytes. A DESC part has every byte of its image (null byte included)
// complemented, which reverses its order and nothing else.
//
// Sort forms: strings (CHAR, VARCHAR, TEXT, BLOB and their binary kinds) are their collation's
// weights (strnxfrm) over the part's characters, padded to the part's full width, followed for
// variable-length binary strings by the value's length; every other type is the server's own
// memcomparable image (Field::sort_string: big-endian integers with the sign bit flipped,
// DECIMAL's binary form, transformed FLOAT/DOUBLE bits, the temporal types' binary forms, ENUM
// and SET as their numbers, BIT as its bytes).
//
// Concurrency contract: plain functions over the caller's buffers; they use the TABLE's Field
// objects, which belong to the handler's thread.
#ifndef RIPTIDE_MARIADB_KEY_ENCODING_H
#define RIPTIDE_MARIADB_KEY_ENCODING_H

#include <my_global.h>
#include <table.h>

#include <string>

namespace riptide_sql {

// The key format version written in the data dictionary.
constexpr unsigned kKeyFormatVersion = 1;

// The id byte of the primary index (declared or hidden).
constexpr unsigned char kPrimaryIndexId = 0x00;
// The id byte of the table's metadata records (data dictionary, AUTO_INCREMENT counter,
// statistics): above every index id.
constexpr unsigned char kMetaId = 0xFF;

// The id byte of index `index` of `share`: 0 for the primary key, index number + 1 otherwise.
unsigned char index_id(const TABLE_SHARE *share, uint index);

// Bytes of key part `part`'s image (null byte included).
uint key_part_width(const KEY_PART_INFO *part);

// Bytes of the image of the first `parts` key parts of `key`.
uint key_width(const KEY *key, uint parts);

// Appends to `out` the images of the first `parts` key parts of index `index`, taken from
// `record` (a record buffer of `table`). Sets `*has_null` when one of them is NULL.
void append_key_parts(TABLE *table, uint index, const uchar *record, uint parts, std::string *out, bool *has_null);

// True when index `index` of `table` can be encoded; otherwise false with the reason in `why`.
bool index_is_supported(const TABLE *table, uint index, std::string *why);

// The smallest byte string greater than every string that starts with `prefix` (empty when
// there is none: `prefix` is all 0xFF).
std::string prefix_successor(const std::string &prefix);

// Number of leading parts in a key_part_map (the server passes contiguous maps).
uint parts_in_map(key_part_map map);

}  // namespace riptide_sql

#endif
