"""PyTorch Distributed Checkpoint `.metadata` pickles read and written without torch: every
global the pickle names becomes a stub class of the same module and name, so a loaded file can be
changed (mcore_test.py beside it damages them) or a new one built (bench/convert makes a large
Megatron Core checkpoint) and pickled back with exactly the globals a real one has.
"""
import io
import pickle


class Stub:
    """Any global of a .metadata pickle, kept by name so that it pickles back the same."""

    def __new__(cls, *args):  # NEWOBJ calls __new__ only
        obj = object.__new__(cls)
        obj.args, obj.state = args, None
        return obj

    def __setstate__(self, state):
        self.state = state


_stubs = {}


def stub_class(module, name):
    key = (module, name)
    if key not in _stubs:
        _stubs[key] = type(name, (Stub,), {"ftx_global": key})
    return _stubs[key]


class Attr(Stub):
    """getattr(cls, name) as a pickle spells an enum member (the memory-format encoding)."""

    def __reduce__(self):
        return (getattr, self.args)


class StubUnpickler(pickle._Unpickler):
    def find_class(self, module, name):
        if module == "builtins" and name == "getattr":
            return Attr
        if module == "builtins" or module == "collections":
            return super().find_class(module, name)
        return stub_class(module, name)


class StubPickler(pickle._Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, Attr):
            return obj.__reduce__()
        if isinstance(obj, Stub):
            return (type(obj), obj.args, obj.state)
        return NotImplemented

    def save_global(self, obj, name=None):
        key = getattr(obj, "ftx_global", None)
        if key is None:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{key[0]}\n{key[1]}\n".encode())
        self.memoize(obj)


StubPickler.dispatch = dict(pickle._Pickler.dispatch)
StubPickler.dispatch[type] = StubPickler.save_global


def load_meta(path):
    with open(path, "rb") as f:
        return StubUnpickler(f).load()


def save_meta(obj, path):
    buf = io.BytesIO()
    StubPickler(buf, protocol=2).dump(obj)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
