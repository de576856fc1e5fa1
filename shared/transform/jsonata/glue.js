// The bridge between shared/transform and the embedded JSONata build. The engine runs this file
// once per runtime, after jsonata.min.js, and calls the function that it evaluates to with the
// jsonata function and the guard settings; that call returns {compile, evaluate}.
(function (jsonata, regexTimeoutMs, maxPadWidth) {
    'use strict';

    // QBRegExp is the RegexEngine of every compiled expression. JSONata reads only exec and
    // lastIndex. A match that the engine's regular expression timeout cut short comes back as no
    // match; a null that took that long is reported as an error, never as a silent "no match".
    function QBRegExp(re) {
        this.re = new RegExp(re);
        this.lastIndex = 0;
    }
    QBRegExp.prototype.exec = function (str) {
        this.re.lastIndex = this.lastIndex;
        var start = Date.now();
        var match = this.re.exec(str);
        if (match === null && Date.now() - start >= regexTimeoutMs) {
            throw {
                code: 'QB1001',
                message: 'The regular expression ' + this.re + ' ran longer than ' + regexTimeoutMs + ' ms'
            };
        }
        this.lastIndex = this.re.lastIndex;
        return match;
    };

    // $pad builds its padding natively in one step, which no interrupt can stop; cap its width.
    var pad;
    jsonata('$pad').evaluate().then(function (f) { pad = f.implementation; });
    function guardedPad(str, width, char) {
        if (Math.abs(width) > maxPadWidth) {
            throw {
                code: 'QB1002',
                value: width,
                message: 'The width of $pad must be at most ' + maxPadWidth + ' characters'
            };
        }
        return pad.apply(this, arguments);
    }

    function compile(src, maxDepth) {
        var expr = jsonata(src, { stack: maxDepth, RegexEngine: QBRegExp });
        expr.registerFunction('pad', guardedPad, '<s-ns?:s>');
        return expr;
    }

    // A function inside a result is not JSON: leave it out, as JSON.stringify leaves out a
    // JavaScript function.
    function replacer(key, value) {
        if (value !== null && typeof value === 'object' &&
            (value._jsonata_lambda === true || value._jsonata_function === true)) {
            return undefined;
        }
        return value;
    }

    // evaluate resolves to the result as JSON text, or to undefined when the expression gives
    // no result. input and bindings are JSON text; undefined input means no input document.
    function evaluate(expr, input, bindings) {
        var data = input === undefined ? undefined : JSON.parse(input);
        var vars = bindings === undefined ? undefined : JSON.parse(bindings);
        return expr.evaluate(data, vars).then(function (result) {
            return result === undefined ? undefined : JSON.stringify(result, replacer);
        });
    }

    return { compile: compile, evaluate: evaluate };
})
