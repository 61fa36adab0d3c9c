// The C API's model overrides (ONNX Runtime's free dimension overrides,
// add_initializer and add_external_initializers), on models made by
// data/make_models.py: free_dims.onnx, y = x + B, x float [Dim1 (DATA_BATCH),
// Dim2 (DATA_CHANNEL), 3], B = [1, 2, 3]; external_bias.onnx, y = x + P with P
// stored in an external file that does not exist.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../paths_util.h"
#include "nee/nee.h"

namespace {

std::string ModelPath(const char* name = "free_dims.onnx") {
  return std::string(NEE_TEST_DATA_DIR) + "/unit/api/data/" + name;
}

// Owns the handles one test makes; statuses are checked where they are made.
struct Fixture {
  nee_session_options_t* options = nullptr;
  nee_session_t* session = nullptr;
  std::vector<nee_value_t*> values;
  Fixture() { EXPECT_EQ(nee_session_options_create(&options), nullptr); }
  ~Fixture() {
    for (nee_value_t* v : values) nee_value_release(v);
    nee_session_release(session);
    nee_session_options_release(options);
  }
  nee_value_t* Tensor(nee_dtype_t dtype, std::vector<int64_t> dims, const void* data, size_t size) {
    nee_value_t* v = nullptr;
    EXPECT_EQ(nee_value_create_tensor(dtype, dims.data(), dims.size(), data, size, &v), nullptr);
    values.push_back(v);
    return v;
  }
  // Creates the session; returns the failure's code and message ("" when it succeeded).
  std::string Create(nee_status_code_t* code = nullptr, const char* model = "free_dims.onnx") {
    nee_status_t st = nee_session_create_from_file(ModelPath(model).c_str(), options, &session);
    if (code) *code = st ? nee_status_code(st) : NEE_STATUS_OK;
    std::string message = st ? nee_status_message(st) : "";
    nee_status_free(st);
    return message;
  }
  int64_t InputDim(size_t axis, std::string* symbol = nullptr) {
    int64_t size = 0;
    const char* sym = nullptr;
    EXPECT_EQ(nee_session_value_dim(session, 0, 0, axis, &size, &sym), nullptr);
    if (symbol) *symbol = sym ? sym : "";
    return size;
  }
};

TEST(CApiOverrides, FreeDimensionByNameFixesThatDimOnly) {
  Fixture f;
  ASSERT_EQ(nee_session_options_add_free_dimension_override(f.options, "Dim1", 0, 2), nullptr);
  ASSERT_EQ(f.Create(), "");
  EXPECT_EQ(f.InputDim(0), 2);
  std::string symbol;
  EXPECT_EQ(f.InputDim(1, &symbol), -1);
  EXPECT_EQ(symbol, "Dim2");
  EXPECT_EQ(f.InputDim(2), 3);
}

TEST(CApiOverrides, FreeDimensionByDenotation) {
  Fixture f;
  ASSERT_EQ(nee_session_options_add_free_dimension_override(f.options, "DATA_CHANNEL", 1, 4), nullptr);
  ASSERT_EQ(f.Create(), "");
  EXPECT_EQ(f.InputDim(0), -1);
  EXPECT_EQ(f.InputDim(1), 4);
}

TEST(CApiOverrides, OverriddenDimRefusesOtherSizesAtRunTime) {
  Fixture f;
  ASSERT_EQ(nee_session_options_add_free_dimension_override(f.options, "Dim1", 0, 2), nullptr);
  ASSERT_EQ(f.Create(), "");
  float x[3] = {0, 0, 0};
  const nee_value_t* in = f.Tensor(NEE_DTYPE_FLOAT32, {1, 1, 3}, x, sizeof x);
  const char* name = "x";
  nee_value_t* out = nullptr;
  nee_status_t st = nee_session_run(f.session, &name, &in, 1, nullptr, 0, &out);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(nee_status_code(st), NEE_STATUS_INVALID_ARGUMENT);
  nee_status_free(st);
}

TEST(CApiOverrides, NegativeDimIsRefused) {
  Fixture f;
  nee_status_t st = nee_session_options_add_free_dimension_override(f.options, "Dim1", 0, -3);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(nee_status_code(st), NEE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nee_status_message(st)).find("Dim1"), std::string::npos);
  nee_status_free(st);
}

TEST(CApiOverrides, InitializerReplacesTheModelsAndIsCopied) {
  Fixture f;
  float b[3] = {10, 20, 30};
  nee_value_t* replacement = nullptr;
  ASSERT_EQ(nee_value_create_tensor(NEE_DTYPE_FLOAT32, std::vector<int64_t>{3}.data(), 1, b, sizeof b, &replacement),
            nullptr);
  ASSERT_EQ(nee_session_options_add_initializer(f.options, "B", replacement), nullptr);
  nee_value_release(replacement);  // the options hold their own copy
  ASSERT_EQ(f.Create(), "");
  float x[6] = {1, 1, 1, 2, 2, 2};
  const nee_value_t* in = f.Tensor(NEE_DTYPE_FLOAT32, {1, 2, 3}, x, sizeof x);
  const char* name = "x";
  nee_value_t* out = nullptr;
  ASSERT_EQ(nee_session_run(f.session, &name, &in, 1, nullptr, 0, &out), nullptr);
  f.values.push_back(out);
  const float* y = static_cast<const float*>(nee_value_data(out));
  const float expected[6] = {11, 21, 31, 12, 22, 32};  // x + [10, 20, 30]
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], expected[i]) << i;
}

TEST(CApiOverrides, InitializerOfAnotherTypeIsRefusedByName) {
  Fixture f;
  int64_t b[3] = {1, 2, 3};
  ASSERT_EQ(nee_session_options_add_initializer(f.options, "B", f.Tensor(NEE_DTYPE_INT64, {3}, b, sizeof b)),
            nullptr);
  nee_status_code_t code;
  std::string message = f.Create(&code);
  EXPECT_EQ(code, NEE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'B'"), std::string::npos) << message;
  EXPECT_EQ(f.session, nullptr);
}

TEST(CApiOverrides, UnknownInitializerNameIsRefused) {
  Fixture f;
  float b[3] = {1, 2, 3};
  ASSERT_EQ(nee_session_options_add_initializer(f.options, "nope", f.Tensor(NEE_DTYPE_FLOAT32, {3}, b, sizeof b)),
            nullptr);
  nee_status_code_t code;
  std::string message = f.Create(&code);
  EXPECT_EQ(code, NEE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'nope'"), std::string::npos) << message;
}

TEST(CApiOverrides, ExternalInitializerStandsInForMissingExternalData) {
  Fixture f;
  float p[2] = {10, 20};
  ASSERT_EQ(nee_session_options_add_external_initializer(f.options, "P", f.Tensor(NEE_DTYPE_FLOAT32, {2}, p, sizeof p)),
            nullptr);
  ASSERT_EQ(f.Create(nullptr, "external_bias.onnx"), "");
  float x[2] = {1, 2};
  const nee_value_t* in = f.Tensor(NEE_DTYPE_FLOAT32, {2}, x, sizeof x);
  const char* name = "x";
  nee_value_t* out = nullptr;
  ASSERT_EQ(nee_session_run(f.session, &name, &in, 1, nullptr, 0, &out), nullptr);
  f.values.push_back(out);
  const float* y = static_cast<const float*>(nee_value_data(out));
  EXPECT_EQ(y[0], 11);  // 1 + 10
  EXPECT_EQ(y[1], 22);  // 2 + 20
}

TEST(CApiOverrides, WithoutItTheMissingExternalFileIsReported) {
  Fixture f;
  nee_status_code_t code;
  std::string message = f.Create(&code, "external_bias.onnx");
  EXPECT_NE(code, NEE_STATUS_OK);
  EXPECT_NE(message.find("P_not_on_disk.bin"), std::string::npos) << message;
}

TEST(CApiOverrides, ExternalInitializerMustMatchTheStoredShape) {
  Fixture f;
  float p[3] = {1, 2, 3};
  ASSERT_EQ(nee_session_options_add_external_initializer(f.options, "P", f.Tensor(NEE_DTYPE_FLOAT32, {3}, p, sizeof p)),
            nullptr);
  nee_status_code_t code;
  std::string message = f.Create(&code, "external_bias.onnx");
  EXPECT_EQ(code, NEE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'P'"), std::string::npos) << message;
}

TEST(CApiOverrides, ExternalInitializerForAnInternalTensorIsRefused) {
  Fixture f;  // free_dims.onnx stores B inside the model, as ONNX Runtime requires it to be external
  float b[3] = {1, 2, 3};
  ASSERT_EQ(nee_session_options_add_external_initializer(f.options, "B", f.Tensor(NEE_DTYPE_FLOAT32, {3}, b, sizeof b)),
            nullptr);
  nee_status_code_t code;
  std::string message = f.Create(&code);
  EXPECT_EQ(code, NEE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'B'"), std::string::npos) << message;
}

TEST(CApiOverrides, NullArgumentsAreRefused) {
  Fixture f;
  float b[1] = {0};
  nee_value_t* v = f.Tensor(NEE_DTYPE_FLOAT32, {1}, b, sizeof b);
  for (nee_status_t st : {nee_session_options_add_free_dimension_override(nullptr, "a", 0, 1),
                          nee_session_options_add_free_dimension_override(f.options, nullptr, 0, 1),
                          nee_session_options_add_initializer(f.options, nullptr, v),
                          nee_session_options_add_initializer(f.options, "B", nullptr),
                          nee_session_options_add_external_initializer(f.options, nullptr, v)}) {
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(nee_status_code(st), NEE_STATUS_INVALID_ARGUMENT);
    nee_status_free(st);
  }
}

}  // namespace
