// eval/worker/native/tensors.h: tensors read through the C++ API only (plain tensors, the inputs' views).
// A part of native.cpp's one translation unit, not a header of its own: native.cpp includes the parts in
// order (one compile, as when they were one file), and each uses what the parts before it define.

// ------------------------------------------------------------------------------------------------
// Tensors, read through the C++ API only

struct View {  // what a run needs of one tensor, taken before the run starts
  bool cuda = false;
  uint8_t* base = nullptr;  // storage start
  size_t nbytes = 0;        // storage size
};

// A class between a tensor's type and torch.Tensor may only carry these (no method, no property,
// no __torch_function__ of its own): it is then a plain tensor in every way that matters.
static bool overrides_nothing(PyTypeObject* t) {
  static const std::set<std::string> inert{"__module__", "__doc__", "__qualname__", "__dict__", "__weakref__",
                                           "__annotations__", "__slots__", "__firstlineno__",
                                           "__static_attributes__", "__orig_bases__", "__parameters__"};
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  if (!t->tp_dict) return false;
  while (PyDict_Next(t->tp_dict, &pos, &key, &value)) {
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    if (!name || !inert.count(name)) return false;
  }
  return true;
}

// torch.Tensor itself, torch.nn.Parameter (captured before the submission existed), or a subclass
// of them that overrides nothing (the leaderboard's isinstance check accepts these).
static bool is_plain_tensor(PyObject* o) {
  if (!o || !PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type)) return false;
  PyObject* mro = Py_TYPE(o)->tp_mro;  // the classes before torch.Tensor (or Parameter) in lookup order
  if (!mro || !PyTuple_Check(mro)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
    PyObject* t = PyTuple_GET_ITEM(mro, i);
    if (t == S.tensor_type || t == S.parameter_type) return true;
    if (!overrides_nothing((PyTypeObject*)t)) return false;
  }
  return false;
}

static const at::Tensor& unpack(PyObject* o) { return THPVariable_Unpack(o); }

static std::string plain_tensor_problem(PyObject* o) {
  if (!o || !PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type))
    return std::string("output is a ") + (o ? Py_TYPE(o)->tp_name : "null") + ", not a torch.Tensor";
  if (!is_plain_tensor(o))
    return std::string("output is a ") + Py_TYPE(o)->tp_name + ", not a plain torch.Tensor (a subclass that overrides behaviour)";
  const at::Tensor& t = unpack(o);
  if (t.key_set().has(c10::DispatchKey::Python)) return "output is a tensor with Python dispatch, not a plain torch.Tensor";
  if (t.layout() != at::kStrided) return "output is not a strided (dense) tensor";
  if (!t.is_cpu() && !t.is_cuda()) return "output is on " + t.device().str() + ", not on the inputs' CPU or CUDA device";
  if (!t.has_storage()) return "output is a tensor without storage";
  return "";
}

static View view_of(const at::Tensor& t) {
  View v;
  v.cuda = t.is_cuda();
  v.base = (uint8_t*)t.storage().data();
  v.nbytes = t.storage().nbytes();
  return v;
}

// The tensors of an input, in the judge's order (eval/problem_folder.py flatten): every tensor
// anywhere in it, depth first, tuple/list items in order, dict values in insertion order; a single
// tensor is itself. Anything else (numbers, strings, None, config dicts' values) is not counted.
static const int MAX_DEPTH = 32;  // as problem_folder.MAX_DEPTH

static void tensor_leaves(PyObject* o, int depth, std::vector<PyObject*>& out) {
  if (PyObject_TypeCheck(o, (PyTypeObject*)S.tensor_type)) { out.push_back(o); return; }
  if (depth >= MAX_DEPTH) return;
  if (PyTuple_Check(o)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) tensor_leaves(PyTuple_GET_ITEM(o, i), depth + 1, out);
  } else if (PyList_Check(o)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) tensor_leaves(PyList_GET_ITEM(o, i), depth + 1, out);
  } else if (PyDict_Check(o)) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &key, &value)) tensor_leaves(value, depth + 1, out);
  }
}

// Each view keeps its own device: a problem may hand CPU tensors beside CUDA ones (nvfp4_group_gemm's
// problem sizes), or CPU tensors only on a GPU machine; hashing and refilling follow each view's.
static std::vector<View> input_views(py::handle data, bool) {
  std::vector<PyObject*> items;
  tensor_leaves(data.ptr(), 0, items);
  std::vector<View> views;
  for (PyObject* item : items) {
    if (!is_plain_tensor(item)) { views.push_back(View{}); continue; }
    const at::Tensor& t = unpack(item);
    if (t.key_set().has(c10::DispatchKey::Python) || !t.has_storage()) throw std::runtime_error("input is not a plain tensor");
    View v = view_of(t);
    views.push_back(v);
  }
  return views;
}
