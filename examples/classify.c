/* Classifies a few handwritten digits with the bundled scikit-learn model
 * through nee's C API, and checks the predictions against the true labels.
 *
 *   classify MODEL [X.npy Y.npy]
 *
 * Every call's status is checked; failures print the engine's message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nee/nee.h"

static int check(nee_status_t status, const char* what) {
  if (!status) return 0;
  fprintf(stderr, "%s failed (%d): %s\n", what, (int)nee_status_code(status), nee_status_message(status));
  nee_status_free(status);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [X.npy Y.npy]\n", argv[0]);
    return 2;
  }
  char x_path[4096], y_path[4096];
  if (argc >= 4) {
    snprintf(x_path, sizeof x_path, "%s", argv[2]);
    snprintf(y_path, sizeof y_path, "%s", argv[3]);
  } else { /* the test files beside the model */
    const char* slash = strrchr(argv[1], '/');
    int dir_len = slash ? (int)(slash - argv[1]) : 1;
    const char* dir = slash ? argv[1] : ".";
    snprintf(x_path, sizeof x_path, "%.*s/digits_test_x.npy", dir_len, dir);
    snprintf(y_path, sizeof y_path, "%.*s/digits_test_y.npy", dir_len, dir);
  }

  nee_session_options_t* options = NULL;
  nee_session_t* session = NULL;
  nee_value_t *x = NULL, *y = NULL;
  nee_value_t* outputs[2] = {NULL, NULL};
  int rc = 1;
  if (check(nee_session_options_create(&options), "nee_session_options_create")) goto done;
  nee_session_options_set_intra_op_threads(options, 1);
  if (check(nee_session_create_from_file(argv[1], options, &session), "nee_session_create_from_file")) goto done;
  if (nee_session_output_count(session) < 1) {
    fprintf(stderr, "the model has no outputs\n");
    goto done;
  }
  if (check(nee_value_load_file(x_path, &x), "loading the images")) goto done;
  if (check(nee_value_load_file(y_path, &y), "loading the labels")) goto done;

  nee_value_info_t input;
  if (check(nee_session_value_info(session, 0, 0, &input), "nee_session_value_info")) goto done;
  const char* names[1] = {input.name};
  const nee_value_t* inputs[1] = {x};
  const char* wanted[1] = {"label"};
  if (check(nee_session_run(session, names, inputs, 1, wanted, 1, outputs), "nee_session_run")) goto done;

  if (nee_value_dtype(outputs[0]) != NEE_DTYPE_INT64 || nee_value_dtype(y) != NEE_DTYPE_INT64 ||
      nee_value_element_count(outputs[0]) != nee_value_element_count(y)) {
    fprintf(stderr, "unexpected output: labels should be int64, one per image\n");
    goto done;
  }
  const int64_t* predicted = (const int64_t*)nee_value_data(outputs[0]);
  const int64_t* truth = (const int64_t*)nee_value_data(y);
  int64_t n = nee_value_element_count(y), correct = 0;
  for (int64_t i = 0; i < n; ++i) correct += predicted[i] == truth[i];
  printf("first predictions:");
  for (int64_t i = 0; i < n && i < 10; ++i) printf(" %lld", (long long)predicted[i]);
  printf("\naccuracy: %lld/%lld = %.3f\n", (long long)correct, (long long)n, n ? (double)correct / n : 0.0);
  rc = (n > 0 && correct * 10 >= n * 9) ? 0 : 1; /* the model scores above 90% */

done:
  nee_value_release(outputs[0]);
  nee_value_release(x);
  nee_value_release(y);
  nee_session_release(session);
  nee_session_options_release(options);
  return rc;
}
