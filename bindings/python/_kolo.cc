// kolo._kolo: the Python extension over kolo's C API. Tensors arrive as DLPack capsules, so
// the extension is built against no framework. This file only translates: names, capsules and
// codes in; handles, capsules and KoloError out. The Handle owns references to the capsules it
// was given, so the tensors' memory lives until the operation completes.
#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/config.h"
#include "kolo/kolo.h"

namespace py = pybind11;

namespace {

// The Python exception type, created at module import.
PyObject* g_kolo_error = nullptr;

[[noreturn]] void Raise(kolo_status_t code, const std::string& message) {
  py::object type = py::reinterpret_borrow<py::object>(g_kolo_error);
  py::object err = type(message);
  err.attr("code") = static_cast<int>(code);
  PyErr_SetObject(g_kolo_error, err.ptr());
  throw py::error_already_set();
}

void Check(kolo_status_t code) {
  if (code != KOLO_SUCCESS) Raise(code, kolo_last_error());
}

// A borrowed view of a DLPack capsule's tensor, checked: CPU, contiguous, item size of dtype.
struct TensorView {
  void* data = nullptr;
  std::vector<int64_t> shape;
  int device = KOLO_DEVICE_HOST;  // the CUDA ordinal of a CUDA tensor
};

TensorView View(const py::capsule& capsule, kolo_dtype_t dtype, const std::string& what) {
  if (std::strcmp(capsule.name(), "dltensor") != 0) {
    Raise(KOLO_ERR_INVALID_ARGUMENT,
          what + ": expected an unused DLPack capsule named 'dltensor', got '" +
              capsule.name() + "'");
  }
  auto* managed = static_cast<DLManagedTensor*>(capsule.get_pointer());
  const DLTensor& t = managed->dl_tensor;
  // CUDA memory passes here; the runtime decides what it can do with it.
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDA) {
    Raise(KOLO_ERR_INVALID_ARGUMENT,
          what + ": only CPU and CUDA tensors are supported (DLPack device type " +
              std::to_string(t.device.device_type) + ")");
  }
  const size_t item = kolo_dtype_size(dtype);
  if (item == 0) Raise(KOLO_ERR_INVALID_ARGUMENT, what + ": unknown dtype code");
  if (t.dtype.lanes != 1 || t.dtype.bits != item * 8) {
    Raise(KOLO_ERR_INVALID_ARGUMENT,
          what + ": tensor elements are " + std::to_string(t.dtype.bits) + "-bit, dtype code " +
              std::to_string(dtype) + " needs " + std::to_string(item * 8));
  }
  if (t.ndim > KOLO_MAX_DIMS) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, what + ": more than " + std::to_string(KOLO_MAX_DIMS) +
                                         " dimensions");
  }
  TensorView v;
  v.shape.assign(t.shape, t.shape + t.ndim);
  const bool empty = std::find(v.shape.begin(), v.shape.end(), 0) != v.shape.end();
  // NULL strides mean compact row-major; an empty tensor has no layout to check (torch 1.13
  // exports made-up strides for it, e.g. [1,1] for shape [0,3]).
  if (t.strides && !empty) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected) {
        Raise(KOLO_ERR_INVALID_ARGUMENT, what + ": tensor is not contiguous");
      }
      expected *= t.shape[i];
    }
  }
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  if (t.device.device_type == kDLCUDA) v.device = t.device.device_id;
  return v;
}

class Handle {
 public:
  Handle(kolo_handle_t h, std::vector<py::object> keep, kolo_dtype_t dtype, std::string name)
      : h_(h), keep_(std::move(keep)), dtype_(dtype), name_(std::move(name)) {}
  ~Handle() {
    if (!h_) return;
    {
      // The operation may still write into the kept buffers: wait before releasing them.
      py::gil_scoped_release release;
      kolo_wait(h_);
    }
    kolo_handle_free(h_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  bool Poll() const {
    CheckOwned();
    return kolo_poll(h_) != 0;
  }

  // alltoall only: the number of ranks of its process set, known at submission.
  void SetSplitsCount(int count) { splits_count_ = count; }

  // alltoall only, after a successful wait: how many rows came from each rank of its set.
  std::vector<int64_t> ReceivedSplits() {
    Wait();
    if (splits_count_ <= 0) {
      Raise(KOLO_ERR_FAILED_PRECONDITION, "'" + name_ + "': not an alltoall");
    }
    std::vector<int64_t> splits(static_cast<size_t>(splits_count_));
    Check(kolo_handle_received_splits(h_, splits.data()));
    return splits;
  }

  // Waits in slices with the GIL released and checks for signals between them, so Ctrl-C
  // (KeyboardInterrupt) and a test runner's SIGALRM reach a thread blocked in a collective
  // promptly instead of when (if ever) the operation ends. The operation itself goes on: the
  // handle stays valid and can be waited for again.
  void Wait() {
    CheckOwned();
    constexpr int64_t kSliceMs = 50;
    for (;;) {
      int done;
      {
        py::gil_scoped_release release;
        done = kolo_wait_for(h_, kSliceMs);
      }
      if (done) break;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    const kolo_status_t s = kolo_wait(h_);
    if (s != KOLO_SUCCESS) Raise(s, kolo_handle_message(h_));
  }

  // The gathered tensor as a DLPack capsule, on the device kolo wrote it to (host memory, or
  // the input's CUDA device). Its memory belongs to the kolo handle, which the capsule's deleter
  // frees: ownership moves to the consumer, so this works once. kolo completed the handle only
  // after its stream finished writing, so the consumer may read it on any stream.
  py::capsule Output() {
    Wait();
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS];
    Check(kolo_handle_output(h_, &data, &ndim, shape));
    int device = KOLO_DEVICE_HOST;
    Check(kolo_handle_output_device(h_, &device));
    struct Owner {
      kolo_handle_t handle;
      std::vector<int64_t> shape;
    };
    auto* owner = new Owner{h_, std::vector<int64_t>(shape, shape + ndim)};
    auto* managed = new DLManagedTensor{};
    managed->dl_tensor.data = const_cast<void*>(data);
    managed->dl_tensor.device =
        device >= 0 ? DLDevice{kDLCUDA, device} : DLDevice{kDLCPU, 0};
    managed->dl_tensor.ndim = ndim;
    managed->dl_tensor.dtype = DlType(dtype_);
    managed->dl_tensor.shape = owner->shape.data();
    managed->dl_tensor.strides = nullptr;
    managed->dl_tensor.byte_offset = 0;
    managed->manager_ctx = owner;
    managed->deleter = [](DLManagedTensor* self) {
      auto* o = static_cast<Owner*>(self->manager_ctx);
      kolo_handle_free(o->handle);
      delete o;
      delete self;
    };
    h_ = nullptr;  // owned by the capsule now
    // A capsule never consumed still frees the tensor (DLPack's convention: a consumer renames
    // it to "used_dltensor" and takes over the deleter).
    return py::capsule(managed, "dltensor", [](PyObject* cap) {
      if (std::strcmp(PyCapsule_GetName(cap), "dltensor") != 0) return;
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      if (m && m->deleter) m->deleter(m);
    });
  }

 private:
  void CheckOwned() const {
    if (!h_) {
      Raise(KOLO_ERR_FAILED_PRECONDITION,
            "'" + name_ + "': the handle's output was already taken (call received_splits "
            "before output)");
    }
  }

  static DLDataType DlType(kolo_dtype_t d) {
    switch (d) {
      case KOLO_UINT8: return {kDLUInt, 8, 1};
      case KOLO_INT8: return {kDLInt, 8, 1};
      case KOLO_UINT16: return {kDLUInt, 16, 1};
      case KOLO_INT16: return {kDLInt, 16, 1};
      case KOLO_INT32: return {kDLInt, 32, 1};
      case KOLO_INT64: return {kDLInt, 64, 1};
      case KOLO_FLOAT16: return {kDLFloat, 16, 1};
      case KOLO_FLOAT32: return {kDLFloat, 32, 1};
      case KOLO_FLOAT64: return {kDLFloat, 64, 1};
      case KOLO_BOOL: return {kDLUInt, 8, 1};  // DLPack 0.6 has no bool; torch does the same
      case KOLO_BFLOAT16: return {kDLBfloat, 16, 1};
    }
    return {kDLUInt, 8, 1};
  }

  kolo_handle_t h_;
  std::vector<py::object> keep_;
  kolo_dtype_t dtype_;
  std::string name_;
  int splits_count_ = 0;
};

// Names cross the C API as C strings: an embedded NUL would silently truncate them, and two
// different names could then match.
const std::string& CheckName(const std::string& name) {
  if (name.find('\0') != std::string::npos) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "operation name contains a NUL character");
  }
  return name;
}

kolo_dtype_t Dtype(int code) {
  if (kolo_dtype_size(static_cast<kolo_dtype_t>(code)) == 0) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "unknown kolo dtype code " + std::to_string(code));
  }
  return static_cast<kolo_dtype_t>(code);
}

std::unique_ptr<Handle> AllreduceAsync(const std::string& name, py::capsule in, py::capsule out,
                                       int dtype_code, int op, double prescale, double postscale,
                                       int process_set, std::uintptr_t stream) {
  const kolo_dtype_t dtype = Dtype(dtype_code);
  TensorView vin = View(in, dtype, "allreduce '" + name + "' input");
  TensorView vout = in.ptr() == out.ptr() ? vin : View(out, dtype, "allreduce '" + name + "' output");
  if (vout.shape != vin.shape) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "allreduce '" + name + "': output shape differs from input");
  }
  kolo_handle_t h = nullptr;
  Check(kolo_allreduce_async_on_stream(
      process_set, CheckName(name).c_str(), vin.data, vout.data, dtype,
      static_cast<int>(vin.shape.size()), vin.shape.data(), static_cast<kolo_reduce_op_t>(op),
      prescale, postscale, reinterpret_cast<void*>(stream), &h));
  return std::make_unique<Handle>(h, std::vector<py::object>{in, out}, dtype, name);
}

// For the operations below: the tensor's device comes from its capsule (so an empty CUDA
// tensor, whose pointer may be NULL, is still known to be on the GPU), and `stream` is the
// framework stream whose queued work writes it (0: none).
std::unique_ptr<Handle> AllgatherAsync(const std::string& name, py::capsule in, int dtype_code,
                                       int process_set, std::uintptr_t stream) {
  const kolo_dtype_t dtype = Dtype(dtype_code);
  TensorView vin = View(in, dtype, "allgather '" + name + "' input");
  kolo_handle_t h = nullptr;
  Check(kolo_allgather_async_on_stream(process_set, CheckName(name).c_str(), vin.data, dtype,
                                       static_cast<int>(vin.shape.size()), vin.shape.data(),
                                       vin.device, reinterpret_cast<void*>(stream), &h));
  return std::make_unique<Handle>(h, std::vector<py::object>{in}, dtype, name);
}

std::unique_ptr<Handle> ReducescatterAsync(const std::string& name, py::capsule in, int dtype_code,
                                           int op, double prescale, double postscale,
                                           int process_set, std::uintptr_t stream) {
  const kolo_dtype_t dtype = Dtype(dtype_code);
  TensorView vin = View(in, dtype, "reducescatter '" + name + "' input");
  kolo_handle_t h = nullptr;
  Check(kolo_reducescatter_async_on_stream(
      process_set, CheckName(name).c_str(), vin.data, dtype, static_cast<int>(vin.shape.size()),
      vin.shape.data(), static_cast<kolo_reduce_op_t>(op), prescale, postscale, vin.device,
      reinterpret_cast<void*>(stream), &h));
  return std::make_unique<Handle>(h, std::vector<py::object>{in}, dtype, name);
}

std::unique_ptr<Handle> AlltoallAsync(const std::string& name, py::capsule in, int dtype_code,
                                      const std::vector<int64_t>& splits, int process_set,
                                      std::uintptr_t stream) {
  const kolo_dtype_t dtype = Dtype(dtype_code);
  TensorView vin = View(in, dtype, "alltoall '" + name + "' input");
  // kolo reads one split per rank of the set: a shorter list would be read past its end.
  const int set_size = kolo_process_set_size(process_set);
  if (!splits.empty() && set_size > 0 && splits.size() != static_cast<size_t>(set_size)) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "alltoall '" + name + "': " + std::to_string(splits.size()) +
                                         " splits for " + std::to_string(set_size) + " ranks");
  }
  kolo_handle_t h = nullptr;
  Check(kolo_alltoall_async_on_stream(process_set, CheckName(name).c_str(), vin.data, dtype,
                                      static_cast<int>(vin.shape.size()), vin.shape.data(),
                                      splits.empty() ? nullptr : splits.data(), vin.device,
                                      reinterpret_cast<void*>(stream), &h));
  auto handle = std::make_unique<Handle>(h, std::vector<py::object>{in}, dtype, name);
  handle->SetSplitsCount(set_size);
  return handle;
}

std::unique_ptr<Handle> BroadcastAsync(const std::string& name, py::capsule in, py::capsule out,
                                       int dtype_code, int root, int process_set) {
  const kolo_dtype_t dtype = Dtype(dtype_code);
  TensorView vin = View(in, dtype, "broadcast '" + name + "' input");
  TensorView vout = in.ptr() == out.ptr() ? vin : View(out, dtype, "broadcast '" + name + "' output");
  if (vout.shape != vin.shape) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "broadcast '" + name + "': output shape differs from input");
  }
  kolo_handle_t h = nullptr;
  Check(kolo_broadcast_async_on(process_set, CheckName(name).c_str(), vin.data, vout.data, dtype,
                                static_cast<int>(vin.shape.size()), vin.shape.data(), root, &h));
  return std::make_unique<Handle>(h, std::vector<py::object>{in, out}, dtype, name);
}

// One call for a whole group (kolo_grouped_*_async_on): negotiated and executed all-or-nothing.
// `op_name` is "allreduce", "allgather" or "reducescatter"; `outs` is read for allreduce only
// (an entry that is the input capsule itself selects in place). Returns one Handle per tensor.
py::list GroupedAsync(const std::string& op_name, const std::vector<std::string>& names,
                      const std::vector<py::capsule>& ins, const std::vector<py::capsule>& outs,
                      const std::vector<int>& dtype_codes, int op, double prescale,
                      double postscale, int process_set, std::uintptr_t stream) {
  const bool allreduce = op_name == "allreduce";
  const size_t n = names.size();
  if (ins.size() != n || dtype_codes.size() != n || (allreduce && outs.size() != n) || n == 0) {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "grouped " + op_name + ": lists of different lengths");
  }
  std::vector<std::string> checked;
  std::vector<TensorView> vin, vout;
  std::vector<kolo_dtype_t> dtypes;
  for (size_t i = 0; i < n; ++i) {
    checked.push_back(CheckName(names[i]));
    dtypes.push_back(Dtype(dtype_codes[i]));
    vin.push_back(View(ins[i], dtypes[i], op_name + " '" + names[i] + "' input"));
    if (allreduce) {
      vout.push_back(ins[i].ptr() == outs[i].ptr()
                         ? vin.back()
                         : View(outs[i], dtypes[i], op_name + " '" + names[i] + "' output"));
      if (vout.back().shape != vin.back().shape) {
        Raise(KOLO_ERR_INVALID_ARGUMENT,
              op_name + " '" + names[i] + "': output shape differs from input");
      }
    }
  }
  std::vector<const char*> name_ptrs;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  std::vector<int> ndims, devices;
  std::vector<const int64_t*> shapes;
  for (size_t i = 0; i < n; ++i) {
    name_ptrs.push_back(checked[i].c_str());
    devices.push_back(vin[i].device);
    in_ptrs.push_back(vin[i].data);
    if (allreduce) out_ptrs.push_back(vout[i].data);
    ndims.push_back(static_cast<int>(vin[i].shape.size()));
    shapes.push_back(vin[i].shape.data());
  }
  std::vector<kolo_handle_t> handles(n, nullptr);
  const int count = static_cast<int>(n);
  const auto reduce_op = static_cast<kolo_reduce_op_t>(op);
  void* const ready = reinterpret_cast<void*>(stream);
  if (allreduce) {
    Check(kolo_grouped_allreduce_async_on_stream(
        process_set, count, name_ptrs.data(), in_ptrs.data(), out_ptrs.data(), dtypes.data(),
        ndims.data(), shapes.data(), reduce_op, prescale, postscale, devices.data(), ready,
        handles.data()));
  } else if (op_name == "allgather") {
    Check(kolo_grouped_allgather_async_on_stream(process_set, count, name_ptrs.data(),
                                                 in_ptrs.data(), dtypes.data(), ndims.data(),
                                                 shapes.data(), devices.data(), ready,
                                                 handles.data()));
  } else if (op_name == "reducescatter") {
    Check(kolo_grouped_reducescatter_async_on_stream(
        process_set, count, name_ptrs.data(), in_ptrs.data(), dtypes.data(), ndims.data(),
        shapes.data(), reduce_op, prescale, postscale, devices.data(), ready, handles.data()));
  } else {
    Raise(KOLO_ERR_INVALID_ARGUMENT, "grouped '" + op_name + "': not a grouped operation");
  }
  py::list out;
  for (size_t i = 0; i < n; ++i) {
    std::vector<py::object> keep{ins[i]};
    if (allreduce) keep.push_back(outs[i]);
    out.append(py::cast(std::make_unique<Handle>(handles[i], std::move(keep), dtypes[i],
                                                 names[i])));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_kolo, m) {
  m.doc() = "kolo's C API for Python; tensors as DLPack capsules (see bindings/python/README.md)";
  py::object runtime_error = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  g_kolo_error = PyErr_NewExceptionWithDoc(
      "kolo._kolo.KoloError", "A kolo operation failed; .code is the kolo_status_t.",
      runtime_error.ptr(), nullptr);
  m.attr("KoloError") = py::reinterpret_borrow<py::object>(g_kolo_error);

  m.def("init", [] {
    kolo_status_t s;
    {
      py::gil_scoped_release release;  // collective: may wait for the other ranks
      s = kolo_init();
    }
    Check(s);
  });
  m.def(
      "init_ranks",
      [](const std::vector<int>& ranks) {
        kolo_status_t s;
        {
          py::gil_scoped_release release;  // collective over the listed ranks
          s = kolo_init_ranks(ranks.data(), static_cast<int>(ranks.size()));
        }
        Check(s);
      },
      py::arg("ranks"));
  // An mpi4py communicator arrives as its Fortran handle (comm.py2f()): portable across MPI
  // implementations and needs no mpi4py headers here, nor MPI (kolo converts it with its MPI
  // plugin, so a start without MPI never loads libmpi). MPI is initialised by then (mpi4py did).
  m.def(
      "init_comm",
      [](int64_t fortran_handle) {
        kolo_status_t s;
        {
          py::gil_scoped_release release;  // collective over the communicator
          s = kolo_init_comm_fortran(static_cast<int>(fortran_handle));
        }
        Check(s);
      },
      py::arg("fortran_handle"));
  m.def("shutdown", [] {
    py::gil_scoped_release release;
    kolo_shutdown();
  });
  m.def("is_initialized", [] { return kolo_is_initialized() != 0; });
  m.def("rank", &kolo_rank);
  m.def("size", &kolo_size);
  m.def("local_rank", &kolo_local_rank);
  m.def("local_size", &kolo_local_size);
  m.def("cross_rank", &kolo_cross_rank);
  m.def("cross_size", &kolo_cross_size);
  m.def("mpi_threads_supported", [] { return kolo_mpi_threads_supported() != 0; });
  m.def("built_with_cuda", [] { return KOLO_WITH_CUDA != 0; });
  m.def("built_with_nccl", [] { return KOLO_WITH_NCCL != 0; });
  m.def("built_with_ucx", [] { return KOLO_WITH_UCX != 0; });

  m.def("allreduce_async", &AllreduceAsync, py::arg("name"), py::arg("input"), py::arg("output"),
        py::arg("dtype"), py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
        py::arg("process_set") = 0, py::arg("stream") = 0);
  m.def(
      "refuse",
      [](int process_set, const std::string& op, const std::string& name,
         const std::string& reason) {
        Check(kolo_refuse_on(process_set, op.c_str(), name.c_str(), reason.c_str()));
      },
      py::arg("process_set"), py::arg("op"), py::arg("name"), py::arg("reason"));
  m.def("grouped_async", &GroupedAsync, py::arg("op_name"), py::arg("names"), py::arg("inputs"),
        py::arg("outputs"), py::arg("dtypes"), py::arg("op") = 0, py::arg("prescale") = 1.0,
        py::arg("postscale") = 1.0, py::arg("process_set") = 0, py::arg("stream") = 0);
  m.def("allgather_async", &AllgatherAsync, py::arg("name"), py::arg("input"), py::arg("dtype"),
        py::arg("process_set") = 0, py::arg("stream") = 0);
  m.def("reducescatter_async", &ReducescatterAsync, py::arg("name"), py::arg("input"),
        py::arg("dtype"), py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
        py::arg("process_set") = 0, py::arg("stream") = 0);
  m.def("alltoall_async", &AlltoallAsync, py::arg("name"), py::arg("input"), py::arg("dtype"),
        py::arg("splits") = std::vector<int64_t>{}, py::arg("process_set") = 0,
        py::arg("stream") = 0);
  m.def(
      "barrier",
      [](int process_set) {
        kolo_status_t s;
        {
          py::gil_scoped_release release;
          s = kolo_barrier_on(process_set);
        }
        Check(s);
      },
      py::arg("process_set") = 0);
  m.def(
      "join",
      [](int device) {
        kolo_status_t s;
        int last = -1;
        {
          py::gil_scoped_release release;  // blocks until every rank has joined
          s = kolo_join_on_device(device, &last);
        }
        Check(s);
        return last;
      },
      py::arg("device") = -1);
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        if (path.find('\0') != std::string::npos) {
          Raise(KOLO_ERR_INVALID_ARGUMENT, "start_timeline: the path contains a NUL character");
        }
        kolo_status_t s;
        {
          py::gil_scoped_release release;  // opens the file
          s = kolo_start_timeline(path.c_str(), mark_cycles ? 1 : 0);
        }
        Check(s);
      },
      py::arg("path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", [] {
    kolo_status_t s;
    {
      py::gil_scoped_release release;  // flushes and closes the file
      s = kolo_stop_timeline();
    }
    Check(s);
  });
  m.def("broadcast_async", &BroadcastAsync, py::arg("name"), py::arg("input"), py::arg("output"),
        py::arg("dtype"), py::arg("root_rank"), py::arg("process_set") = 0);

  // Process sets: add/remove are collective over every rank (GIL released while they wait).
  m.def(
      "add_process_set",
      [](const std::vector<int>& ranks) {
        kolo_status_t s;
        int id = -1;
        {
          py::gil_scoped_release release;
          s = kolo_add_process_set(ranks.data(), static_cast<int>(ranks.size()), &id);
        }
        Check(s);
        return id;
      },
      py::arg("ranks"));
  m.def(
      "remove_process_set",
      [](int process_set) {
        kolo_status_t s;
        {
          py::gil_scoped_release release;
          s = kolo_remove_process_set(process_set);
        }
        Check(s);
      },
      py::arg("process_set"));
  m.def("process_set_rank", &kolo_process_set_rank, py::arg("process_set"));
  m.def("process_set_size", &kolo_process_set_size, py::arg("process_set"));
  // kolo_negotiation_stats as a dict of its fields (for benchmarks: cache hits per step, time
  // spent negotiating).
  m.def("negotiation_stats", [] {
    kolo_negotiation_stats_t s{};
    Check(kolo_negotiation_stats(&s));
    py::dict d;
    d["cycles"] = s.cycles;
    d["slow_cycles"] = s.slow_cycles;
    d["cache_hits"] = s.cache_hits;
    d["cache_misses"] = s.cache_misses;
    d["cache_invalidations"] = s.cache_invalidations;
    d["negotiate_ns"] = s.negotiate_ns;
    d["exchange_ns"] = s.exchange_ns;
    d["fusion_threshold"] = s.fusion_threshold;
    d["cycle_time_ms"] = s.cycle_time_ms;
    return d;
  });
  m.def(
      "process_set_ranks",
      [](int process_set) {
        const int size = kolo_process_set_size(process_set);
        std::vector<int> ranks(static_cast<size_t>(std::max(size, 0)));
        if (size < 0) {
          Raise(KOLO_ERR_INVALID_ARGUMENT,
                "no process set " + std::to_string(process_set) + " (never added, or removed)");
        }
        Check(kolo_process_set_ranks(process_set, ranks.data()));
        return ranks;
      },
      py::arg("process_set"));

  py::class_<Handle>(m, "Handle")
      .def("poll", &Handle::Poll)
      .def("wait", &Handle::Wait)
      .def("output", &Handle::Output)
      .def("received_splits", &Handle::ReceivedSplits);

  m.attr("UINT8") = static_cast<int>(KOLO_UINT8);
  m.attr("INT8") = static_cast<int>(KOLO_INT8);
  m.attr("UINT16") = static_cast<int>(KOLO_UINT16);
  m.attr("INT16") = static_cast<int>(KOLO_INT16);
  m.attr("INT32") = static_cast<int>(KOLO_INT32);
  m.attr("INT64") = static_cast<int>(KOLO_INT64);
  m.attr("FLOAT16") = static_cast<int>(KOLO_FLOAT16);
  m.attr("FLOAT32") = static_cast<int>(KOLO_FLOAT32);
  m.attr("FLOAT64") = static_cast<int>(KOLO_FLOAT64);
  m.attr("BOOL") = static_cast<int>(KOLO_BOOL);
  m.attr("BFLOAT16") = static_cast<int>(KOLO_BFLOAT16);
  m.attr("AVERAGE") = static_cast<int>(KOLO_OP_AVERAGE);
  m.attr("SUM") = static_cast<int>(KOLO_OP_SUM);
  m.attr("ADASUM") = static_cast<int>(KOLO_OP_ADASUM);
  m.attr("MIN") = static_cast<int>(KOLO_OP_MIN);
  m.attr("MAX") = static_cast<int>(KOLO_OP_MAX);
  m.attr("PRODUCT") = static_cast<int>(KOLO_OP_PRODUCT);
}
