#!/usr/bin/env python3
"""Rewrites the ONNX node tests whose graph inputs/outputs are sequences or
optionals (left out by gen_node_tests.py) into tensor-only cases that
`tessel test-onnx` can run: sequence/optional inputs become tensor inputs fed
through SequenceConstruct/SequenceEmpty/Optional; sequence/optional outputs
become SequenceLength + SequenceAt / OptionalHasElement + OptionalGetElement
outputs. The wrapping uses the operators under test, so a pass checks them
together with the case's own operators.

usage: wrap_seq_node_tests.py EXCLUDED_TXT OUT
"""
import os, sys, warnings, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
from onnx.backend.test.loader import load_model_tests
warnings.simplefilter("ignore")
if len(sys.argv) != 3:
    sys.exit(__doc__)
names = [l.split('\t')[0] for l in open(sys.argv[1]) if 'non-tensor' in l]
out = sys.argv[2]
for case in load_model_tests(kind="node"):
    if case.name not in names: continue
    m = case.model; g = m.graph
    ins, outs = case.data_sets[0]
    nodes = []; new_inputs = []; feeds = []; new_outputs = []; expects = []
    for vi, val in zip(g.input, ins):
        k = vi.type.WhichOneof('value')
        if k == 'tensor_type':
            new_inputs.append(vi); feeds.append(np.asarray(val)); continue
        if k == 'sequence_type' or (k == 'optional_type' and isinstance(val, list)):
            seq = val
            names_i = []
            for j, t in enumerate(seq):
                n = f'{vi.name}__{j}'; t = np.asarray(t)
                new_inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(t.dtype), t.shape)); feeds.append(t); names_i.append(n)
            if k == 'optional_type':
                tmp = vi.name + '__seq'
                nodes.append(helper.make_node('SequenceConstruct', names_i, [tmp]) if names_i else helper.make_node('SequenceEmpty', [], [tmp]))
                nodes.append(helper.make_node('Optional', [tmp], [vi.name]))
            elif names_i:
                nodes.append(helper.make_node('SequenceConstruct', names_i, [vi.name]))
            else:
                et = vi.type.sequence_type.elem_type.tensor_type.elem_type
                nodes.append(helper.make_node('SequenceEmpty', [], [vi.name], dtype=et))
        elif k == 'optional_type':
            if val is None:
                nodes.append(helper.make_node('Optional', [], [vi.name], type=vi.type.optional_type.elem_type))
            else:
                t = np.asarray(val); n = vi.name + '__v'
                new_inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(t.dtype), t.shape)); feeds.append(t)
                nodes.append(helper.make_node('Optional', [n], [vi.name]))
    body_nodes = list(g.node)
    tail = []
    for vo, val in zip(g.output, outs):
        k = vo.type.WhichOneof('value')
        if k == 'tensor_type':
            new_outputs.append(vo); expects.append(np.asarray(val)); continue
        src = vo.name
        if k == 'optional_type':
            has = vo.name + '__has'
            tail.append(helper.make_node('OptionalHasElement', [vo.name], [has]))
            new_outputs.append(helper.make_tensor_value_info(has, TensorProto.BOOL, [])); expects.append(np.array(val is not None))
            if val is None: continue
            src = vo.name + '__got'
            tail.append(helper.make_node('OptionalGetElement', [vo.name], [src]))
            if not isinstance(val, list):
                new_outputs.append(helper.make_tensor_value_info(src, TensorProto.UNDEFINED, None)); expects.append(np.asarray(val)); continue
        seq = val
        ln = vo.name + '__len'
        tail.append(helper.make_node('SequenceLength', [src], [ln]))
        new_outputs.append(helper.make_tensor_value_info(ln, TensorProto.INT64, [])); expects.append(np.array(len(seq), dtype=np.int64))
        for j, t in enumerate(seq):
            pos = f'{vo.name}__pos{j}'; at = f'{vo.name}__at{j}'
            tail.append(helper.make_node('Constant', [], [pos], value=numpy_helper.from_array(np.array(j, dtype=np.int64))))
            tail.append(helper.make_node('SequenceAt', [src, pos], [at]))
            new_outputs.append(helper.make_tensor_value_info(at, TensorProto.UNDEFINED, None)); expects.append(np.asarray(t))
    ng = helper.make_graph(nodes + body_nodes + tail, g.name, new_inputs, new_outputs, list(g.initializer))
    nm = helper.make_model(ng, opset_imports=m.opset_import, ir_version=m.ir_version)
    d = os.path.join(out, case.name); os.makedirs(d + '/test_data_set_0', exist_ok=True)
    open(d + '/model.onnx', 'wb').write(nm.SerializeToString())
    for i, v in enumerate(feeds): open(f'{d}/test_data_set_0/input_{i}.pb', 'wb').write(numpy_helper.from_array(v, new_inputs[i].name).SerializeToString())
    for i, v in enumerate(expects): open(f'{d}/test_data_set_0/output_{i}.pb', 'wb').write(numpy_helper.from_array(v, new_outputs[i].name).SerializeToString())
    print('wrote', case.name)
