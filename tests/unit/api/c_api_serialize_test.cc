// nee_value_serialize / nee_value_deserialize (how `nee run --sandbox` sends
// outputs from its child): values made through the C API come back equal,
// the size query works, and hostile bytes are an error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "nee/nee.h"

namespace {

struct Handles {
  std::vector<nee_value_t*> values;
  ~Handles() {
    for (nee_value_t* v : values) nee_value_release(v);
  }
  nee_value_t* Keep(nee_value_t* v) {
    values.push_back(v);
    return v;
  }
};

std::string Serialize(const nee_value_t* v) {
  size_t size = 0;
  EXPECT_EQ(nee_value_serialize(v, nullptr, 0, &size), nullptr);
  std::string bytes(size, '\0');
  size_t again = 0;
  EXPECT_EQ(nee_value_serialize(v, bytes.data(), bytes.size(), &again), nullptr);
  EXPECT_EQ(again, size);
  return bytes;
}

nee_value_t* RoundTrip(Handles& h, const nee_value_t* v) {
  std::string bytes = Serialize(v);
  nee_value_t* out = nullptr;
  nee_status_t s = nee_value_deserialize(bytes.data(), bytes.size(), nee_value_kind(v), &out);
  EXPECT_EQ(s, nullptr) << (s ? nee_status_message(s) : "");
  return h.Keep(out);
}

TEST(CApiSerialize, FloatTensorRoundTrips) {
  Handles h;
  const float data[6] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -7.0f};
  const int64_t dims[2] = {2, 3};
  nee_value_t* v = nullptr;
  ASSERT_EQ(nee_value_create_tensor(NEE_DTYPE_FLOAT32, dims, 2, data, sizeof data, &v), nullptr);
  h.Keep(v);
  nee_value_t* back = RoundTrip(h, v);
  ASSERT_NE(back, nullptr);
  ASSERT_EQ(nee_value_rank(back), 2u);
  EXPECT_EQ(nee_value_dims(back)[0], 2);
  EXPECT_EQ(nee_value_dims(back)[1], 3);
  EXPECT_EQ(nee_value_dtype(back), NEE_DTYPE_FLOAT32);
  ASSERT_EQ(nee_value_data_size(back), sizeof data);
  EXPECT_EQ(std::memcmp(nee_value_data(back), data, sizeof data), 0);
}

TEST(CApiSerialize, StringTensorSequenceAndNoneRoundTrip) {
  Handles h;
  const char* strings[2] = {"ab", "x\0y"};
  const size_t lengths[2] = {2, 3};
  const int64_t dims[1] = {2};
  nee_value_t* s = nullptr;
  ASSERT_EQ(nee_value_create_string_tensor(dims, 1, strings, lengths, &s), nullptr);
  h.Keep(s);
  nee_value_t* back = RoundTrip(h, s);
  ASSERT_NE(back, nullptr);
  const char* bytes = nullptr;
  size_t length = 0;
  ASSERT_EQ(nee_value_string_at(back, 1, &bytes, &length), nullptr);
  EXPECT_EQ(std::string(bytes, length), std::string("x\0y", 3));

  const int64_t one[1] = {1};
  const int64_t value = 42;
  nee_value_t* t = nullptr;
  ASSERT_EQ(nee_value_create_tensor(NEE_DTYPE_INT64, one, 1, &value, sizeof value, &t), nullptr);
  h.Keep(t);
  const nee_value_t* elements[2] = {t, t};
  nee_value_t* seq = nullptr;
  ASSERT_EQ(nee_value_create_sequence(elements, 2, NEE_DTYPE_INT64, &seq), nullptr);
  h.Keep(seq);
  nee_value_t* seq_back = RoundTrip(h, seq);
  ASSERT_NE(seq_back, nullptr);
  ASSERT_EQ(nee_value_kind(seq_back), NEE_VALUE_SEQUENCE);
  ASSERT_EQ(nee_value_sequence_length(seq_back), 2u);
  nee_value_t* second = nullptr;
  ASSERT_EQ(nee_value_sequence_at(seq_back, 1, &second), nullptr);
  h.Keep(second);
  EXPECT_EQ(*static_cast<const int64_t*>(nee_value_data(second)), 42);

  nee_value_t* none = nullptr;
  ASSERT_EQ(nee_value_create_none(&none), nullptr);
  h.Keep(none);
  nee_value_t* none_back = RoundTrip(h, none);
  ASSERT_NE(none_back, nullptr);
  EXPECT_EQ(nee_value_kind(none_back), NEE_VALUE_NONE);
}

TEST(CApiSerialize, ShortBufferWritesNothingAndBadInputIsAnError) {
  Handles h;
  const int64_t dims[1] = {4};
  const int32_t data[4] = {1, 2, 3, 4};
  nee_value_t* v = nullptr;
  ASSERT_EQ(nee_value_create_tensor(NEE_DTYPE_INT32, dims, 1, data, sizeof data, &v), nullptr);
  h.Keep(v);
  std::string buffer(4, 'z');
  size_t size = 0;
  ASSERT_EQ(nee_value_serialize(v, buffer.data(), buffer.size(), &size), nullptr);
  EXPECT_GT(size, buffer.size());
  EXPECT_EQ(buffer, "zzzz");

  nee_value_t* out = nullptr;
  const char garbage[] = "\x0a\xff\xff\xff\xff\x0f";  // a length far past the end
  nee_status_t s = nee_value_deserialize(garbage, sizeof garbage - 1, NEE_VALUE_TENSOR, &out);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(out, nullptr);
  EXPECT_GT(std::strlen(nee_status_message(s)), 0u);
  nee_status_free(s);
  s = nee_value_deserialize(garbage, 0, 17, &out);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(nee_status_code(s), NEE_STATUS_INVALID_ARGUMENT);
  nee_status_free(s);
}

}  // namespace
